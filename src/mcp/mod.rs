//! Protocol knowledge: which versions exist, what each of them defines, and how messages are
//! shaped for a client of a given version.
//!
//! Every decision that depends on the negotiated protocol version is made from here, so that
//! adding a generation touches one place.

pub mod shaping;
pub mod tasks;
pub mod translate;
pub mod version;

pub use version::ProtocolVersion;
