//! Protocol knowledge: which versions exist, what each of them defines, and how messages are
//! shaped for a client of a given version; the 2026-07-28 era (`modern`) and the translation
//! between the two task dialects (`task_dialects`).
//!
//! Every decision that depends on the negotiated protocol version is made from here, so that
//! adding a generation touches one place.

pub mod long_calls;
pub mod modern;
pub mod paging;
pub mod sep1391;
pub mod shaping;
pub mod task_dialects;
pub mod task_messages;
pub mod translate;
pub mod version;

pub use version::ProtocolVersion;
