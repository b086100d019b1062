//! Reading upstream response bodies: whole but bounded, or just their start (for what an
//! HTTP error says, and to leave a connection reusable after a short answer).

use crate::transport::Error;
use crate::transport::http_conn::UpBody;
use bytes::Bytes;
use http_body_util::BodyExt;

/// The whole body, if it is at most `limit` bytes.
pub(crate) async fn read_limited(body: UpBody, limit: usize) -> Result<Bytes, Error> {
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(Error::TooLarge { limit }),
        Err(e) => Err(Error::BodyBroken(e)),
    }
}

/// The first `limit` bytes of a body (the rest is not read).
pub(crate) async fn read_prefix(mut body: UpBody, limit: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < limit {
        match body.frame().await {
            Some(Ok(f)) => {
                if let Ok(data) = f.into_data() {
                    out.extend_from_slice(&data[..data.len().min(limit - out.len())]);
                }
            }
            _ => break,
        }
    }
    out
}
