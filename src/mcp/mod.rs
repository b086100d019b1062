//! Protocol knowledge: which versions exist and what each of them defines.
//!
//! Every decision that depends on the negotiated protocol version is made from here, so that
//! adding a generation touches one place.

pub mod version;

pub use version::ProtocolVersion;
