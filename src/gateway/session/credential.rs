//! A client's own `Authorization`, where its upstream receives it (`authorization =
//! "pass"`): the session keeps one `transport::credential::Credential`, which each of its
//! links sends, and the front that reads the client's requests gives it the header of each
//! ([`Session::present_authorization`]), so the upstream hears the client's latest token.
//! Such a session never rides a shared link: what goes up on it speaks for this client only.

use super::*;

impl Session {
    /// The client's request carried this `Authorization` (`None`: none): requests the
    /// session sends upstream from now on carry it, where the upstream receives the
    /// client's. Called by the front before it hands the request over.
    pub fn present_authorization(&self, value: Option<&str>) {
        if let Some(c) = &self.credential {
            c.set(value);
        }
    }
}
