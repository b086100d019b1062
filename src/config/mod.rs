//! The TOML configuration: parsed, defaulted and validated with messages that name the key.
//!
//! `${VAR}` in an upstream's `url`, `args`, `env` and `headers` values is read from the
//! gateway's environment at load time; such values are redacted whenever the config is
//! printed, and so are a URL's user-info and query.
//!
//! [`Config`] and its parts are the effective settings (`settings`); `raw` is the TOML as
//! written, `load` turns one into the other, `describe` prints the result.

mod describe;
mod duration;
mod error;
mod expand;
mod load;
mod observe;
mod raw;
mod settings;
mod store_kind;

pub use duration::{fmt_duration, parse_duration};
pub use error::ConfigError;
pub use expand::redact_url;
pub use observe::{OtlpConfig, TlsFiles};
pub use settings::*;
