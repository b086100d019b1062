//! The TOML configuration: parsed, defaulted and validated with messages that name the key.
//!
//! `${VAR}` in an upstream's `url`, `args`, `env` and `headers` values is read from the
//! gateway's environment at load time; such values are redacted whenever the config is
//! printed, and so are a URL's user-info and query.
//!
//! [`Config`] and its parts are the effective settings (`settings`); `raw` is the TOML as
//! written, `load` turns one into the other, `describe` prints the result, `change` says
//! what a reload to another would change; `import` reads a
//! desktop client's `mcpServers` JSON file as upstreams; `schema` lists every key the raw
//! types take and `reference` writes docs/configuration.md from it.

mod auth;
mod change;
mod client_auth;
mod describe;
mod duration;
mod error;
mod expand;
mod glob;
mod import;
mod load;
mod long_calls;
mod observe;
mod rate_limit;
mod raw;
mod record_bounds;
mod reference;
mod schema;
mod settings;
mod store_kind;
mod task_page;
mod tool_policy;

pub use auth::{AuthConfig, AuthMode, BearerToken, JwtKey, JwtSettings};
pub use change::{ConfigChange, in_effect, same_sessions};
pub use duration::{fmt_duration, parse_duration};
pub use error::ConfigError;
pub use expand::redact_url;
pub use import::McpServers;
pub use observe::{OtlpConfig, TlsFiles};
pub use rate_limit::RateLimit;
pub use reference::{markdown as reference, undescribed};
pub use settings::*;
pub use tool_policy::{ToolPolicy, ToolRule};
