//! An error answered as the message and bytes sent: kept apart from `error` so that the
//! error type does not import the message it is carried in.

use super::error::RpcError;
use super::keys::Id;
use super::message::Message;

impl RpcError {
    /// [`RpcError::response`] as a message: an id beyond `i64` as it came.
    pub fn response_message(&self, id: Option<&Id>) -> Message {
        let m = Message::made(self.response(id));
        match id.filter(|id| id.is_big()) {
            Some(big) => m.with_id(big),
            None => m,
        }
    }

    /// [`RpcError::response`] as the bytes sent: an id beyond `i64` as it came.
    pub fn response_bytes(&self, id: Option<&Id>) -> bytes::Bytes {
        self.response_message(id).into_bytes()
    }
}
