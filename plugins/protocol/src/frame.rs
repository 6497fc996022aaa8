//! Frames and the newline-delimited codec.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::MAX_FRAME_BYTES;

/// A call. `id` 0 marks a notification: the receiver must not answer it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    pub method: String,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub params: Value,
}

/// The answer to the request with the same `id`: exactly one of `result` / `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
}

impl Response {
    /// A success answer.
    pub fn ok(id: u64, result: Value) -> Self {
        Self {
            id,
            result: Some(result),
            error: None,
        }
    }

    /// An error answer with `code`.
    pub fn err(id: u64, code: i64, message: impl Into<String>) -> Self {
        Self {
            id,
            result: None,
            error: Some(RpcError {
                code,
                message: message.into(),
            }),
        }
    }

    /// A handler's outcome: its result, or its error as invalid params (the text a
    /// tool or channel answers with).
    pub fn outcome(id: u64, outcome: Result<Value, String>) -> Self {
        match outcome {
            Ok(v) => Self::ok(id, v),
            Err(m) => Self::err(id, RpcError::INVALID_PARAMS, m),
        }
    }
}

/// An error answer. `message` is shown to people, so it says what to do next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    /// The frame was not valid JSON or not a frame.
    pub const PARSE: i64 = -32700;
    /// The method does not exist.
    pub const UNKNOWN_METHOD: i64 = -32601;
    /// The params did not match the method.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The plugin lacks the capability the method needs.
    pub const DENIED: i64 = -32001;
    /// The peer went away before answering.
    pub const GONE: i64 = -32002;
}

/// One line of the protocol.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Request(Request),
    Response(Response),
}

impl Frame {
    pub fn is_notification(&self) -> bool {
        matches!(self, Frame::Request(r) if r.id == 0)
    }
}

/// Why a line could not be turned into a frame (or a frame into a line).
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {0} bytes exceeds the {MAX_FRAME_BYTES}-byte limit; send large payloads in parts")]
    TooLarge(usize),
    #[error("frame is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("frame is neither a request (`id`, `method`) nor a response (`id`, `result`|`error`)")]
    Shape,
    #[error("response {0} carries both `result` and `error`; send exactly one")]
    Ambiguous(u64),
}

/// Parses one line (without its newline).
pub fn decode(line: &[u8]) -> Result<Frame, FrameError> {
    if line.len() > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge(line.len()));
    }
    let v: Value = serde_json::from_slice(line)?;
    let obj = v.as_object().ok_or(FrameError::Shape)?;
    if obj.contains_key("method") {
        return Ok(Frame::Request(serde_json::from_value(v)?));
    }
    if obj.contains_key("result") || obj.contains_key("error") {
        let r: Response = serde_json::from_value(v)?;
        if r.result.is_some() && r.error.is_some() {
            return Err(FrameError::Ambiguous(r.id));
        }
        return Ok(Frame::Response(r));
    }
    Err(FrameError::Shape)
}

/// Serialises a frame as one line, newline included.
pub fn encode(frame: &Frame) -> Result<Vec<u8>, FrameError> {
    let mut out = match frame {
        Frame::Request(r) => serde_json::to_vec(r)?,
        Frame::Response(r) => serde_json::to_vec(r)?,
    };
    if out.len() > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge(out.len()));
    }
    out.push(b'\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip_and_notifications() {
        let req = Frame::Request(Request {
            id: 7,
            method: "tool.invoke".into(),
            params: json!({"name": "x"}),
        });
        let line = encode(&req).unwrap();
        assert_eq!(*line.last().unwrap(), b'\n');
        assert_eq!(decode(&line[..line.len() - 1]).unwrap(), req);
        let note = decode(br#"{"id":0,"method":"events.publish"}"#).unwrap();
        assert!(note.is_notification());
        let resp = decode(br#"{"id":7,"error":{"code":-32601,"message":"no"}}"#).unwrap();
        assert!(matches!(
            resp,
            Frame::Response(Response {
                id: 7,
                error: Some(_),
                ..
            })
        ));
    }

    #[test]
    fn bad_frames_are_clear_errors() {
        assert!(matches!(decode(b"{nope"), Err(FrameError::Json(_))));
        assert!(matches!(decode(b"[1]"), Err(FrameError::Shape)));
        assert!(matches!(decode(br#"{"id":1}"#), Err(FrameError::Shape)));
        assert!(matches!(
            decode(br#"{"id":1,"result":1,"error":{"code":1,"message":"m"}}"#),
            Err(FrameError::Ambiguous(1))
        ));
        let big = vec![b' '; MAX_FRAME_BYTES + 1];
        assert!(matches!(decode(&big), Err(FrameError::TooLarge(_))));
        let huge = Frame::Request(Request {
            id: 1,
            method: "m".into(),
            params: json!("x".repeat(MAX_FRAME_BYTES)),
        });
        assert!(matches!(encode(&huge), Err(FrameError::TooLarge(_))));
    }
}
