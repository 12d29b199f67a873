//! HTTP/2 framing for the `:authority` rewrite (authority.rs): the client's frames pass
//! through unchanged except header blocks (HEADERS and its CONTINUATIONs), which are
//! gathered, rewritten and framed again (RFC 9113, 4.1 and 6.2).

use crate::authority::{self, HpackError};

pub const FRAME_HEADER_LEN: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The smallest SETTINGS_MAX_FRAME_SIZE a peer may set, so any server accepts it.
const MAX_FRAME_PAYLOAD: usize = 16_384;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("a HEADERS frame's padding or priority is longer than the frame")]
    BadHeadersFrame,
    #[error("a CONTINUATION frame arrived without a HEADERS frame before it")]
    StrayContinuation,
    #[error(transparent)]
    Hpack(#[from] HpackError),
}

/// The payload length a frame header announces.
pub fn payload_len(head: &[u8; FRAME_HEADER_LEN]) -> usize {
    usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2])
}

/// A header block being gathered: its HEADERS frame's stream, flags and priority fields.
#[derive(Debug)]
struct PendingBlock {
    stream: [u8; 4],
    flags: u8,
    priority: Vec<u8>,
    block: Vec<u8>,
}

/// Turns the client's frames into the frames to send on, one frame at a time.
#[derive(Debug, Default)]
pub struct RequestRewriter {
    pending: Option<PendingBlock>,
}

impl RequestRewriter {
    /// The bytes to forward for one frame (none while a header block is incomplete).
    pub fn frame(
        &mut self,
        head: [u8; FRAME_HEADER_LEN],
        payload: &[u8],
    ) -> Result<Vec<u8>, FrameError> {
        let (kind, flags) = (head[3], head[4]);
        let stream = [head[5], head[6], head[7], head[8]];
        match kind {
            HEADERS => self.pending = Some(headers_frame(stream, flags, payload)?),
            CONTINUATION => {
                let pending = self.pending.as_mut().ok_or(FrameError::StrayContinuation)?;
                pending.block.extend_from_slice(payload);
                pending.flags |= flags & END_HEADERS;
            }
            _ => return Ok([&head[..], payload].concat()),
        }
        match self.pending.take_if(|p| p.flags & END_HEADERS != 0) {
            Some(done) => Ok(encode_block(
                &done,
                &authority::rewrite_header_block(&done.block)?,
            )),
            None => Ok(Vec::new()),
        }
    }
}

fn headers_frame(stream: [u8; 4], flags: u8, payload: &[u8]) -> Result<PendingBlock, FrameError> {
    let mut body = payload;
    if flags & PADDED != 0 {
        let (&pad, rest) = body.split_first().ok_or(FrameError::BadHeadersFrame)?;
        let keep = rest
            .len()
            .checked_sub(usize::from(pad))
            .ok_or(FrameError::BadHeadersFrame)?;
        body = &rest[..keep];
    }
    let priority_len = if flags & PRIORITY != 0 { 5 } else { 0 };
    if body.len() < priority_len {
        return Err(FrameError::BadHeadersFrame);
    }
    let (priority, block) = body.split_at(priority_len);
    Ok(PendingBlock {
        stream,
        // Padding is dropped with the rewrite; END_HEADERS is set again on the last frame.
        flags: flags & !PADDED,
        priority: priority.to_vec(),
        block: block.to_vec(),
    })
}

fn frame_header(len: usize, kind: u8, flags: u8, stream: [u8; 4]) -> [u8; FRAME_HEADER_LEN] {
    let [_, a, b, c] = u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes();
    [
        a, b, c, kind, flags, stream[0], stream[1], stream[2], stream[3],
    ]
}

/// One HEADERS frame, and CONTINUATIONs when the block outgrows the smallest frame size.
fn encode_block(pending: &PendingBlock, block: &[u8]) -> Vec<u8> {
    let payload = [&pending.priority[..], block].concat();
    let mut chunks: Vec<&[u8]> = payload.chunks(MAX_FRAME_PAYLOAD).collect();
    if chunks.is_empty() {
        chunks.push(&[]); // an empty block still needs its one frame
    }
    let last = chunks.len() - 1;
    let mut out = Vec::with_capacity(payload.len() + chunks.len() * FRAME_HEADER_LEN);
    for (i, chunk) in chunks.into_iter().enumerate() {
        let (kind, mut flags) = match i {
            0 => (HEADERS, pending.flags & (END_STREAM | PRIORITY)),
            _ => (CONTINUATION, 0),
        };
        if i == last {
            flags |= END_HEADERS;
        }
        out.extend_from_slice(&frame_header(chunk.len(), kind, flags, pending.stream));
        out.extend_from_slice(chunk);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: [u8; 4] = [0, 0, 0, 1];

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> ([u8; FRAME_HEADER_LEN], Vec<u8>) {
        (
            frame_header(payload.len(), kind, flags, STREAM),
            payload.to_vec(),
        )
    }

    fn authority_block(value: &[u8]) -> Vec<u8> {
        [&[0x41, value.len() as u8][..], value].concat()
    }

    #[test]
    fn other_frames_pass_unchanged() {
        let mut rewriter = RequestRewriter::default();
        let (head, payload) = frame(0x0, END_STREAM, b"grpc message");
        let out = rewriter.frame(head, &payload).expect("forwarded");
        assert_eq!(out, [&head[..], &payload].concat());
    }

    #[test]
    fn a_headers_frame_is_rewritten_keeping_end_stream_and_priority_dropping_padding() {
        let mut rewriter = RequestRewriter::default();
        let block = authority_block(b"/run/x.sock");
        let priority = [0, 0, 0, 3, 15];
        let payload = [&[2u8][..], &priority, &block, &[0, 0]].concat();
        let (head, payload) = frame(
            HEADERS,
            END_STREAM | END_HEADERS | PADDED | PRIORITY,
            &payload,
        );
        let out = rewriter.frame(head, &payload).expect("rewritten");
        let want_payload = [&priority[..], &authority_block(b"localhost")].concat();
        let want_head = frame_header(
            want_payload.len(),
            HEADERS,
            END_STREAM | END_HEADERS | PRIORITY,
            STREAM,
        );
        assert_eq!(out, [&want_head[..], &want_payload].concat());
    }

    #[test]
    fn continuations_are_gathered_into_one_block() {
        let mut rewriter = RequestRewriter::default();
        let block = authority_block(b"/run/x.sock");
        let (head, first) = frame(HEADERS, 0, &block[..4]);
        assert_eq!(rewriter.frame(head, &first), Ok(Vec::new()));
        let (head, rest) = frame(CONTINUATION, END_HEADERS, &block[4..]);
        let out = rewriter.frame(head, &rest).expect("rewritten");
        let want = authority_block(b"localhost");
        let want_head = frame_header(want.len(), HEADERS, END_HEADERS, STREAM);
        assert_eq!(out, [&want_head[..], &want].concat());
    }

    #[test]
    fn a_large_block_is_split_into_continuations() {
        let value = vec![b'v'; MAX_FRAME_PAYLOAD];
        let block: Vec<u8> = [&[0x00, 0x01, b'x'][..], &[0x7f, 0x81, 0x7f], &value].concat();
        let pending = PendingBlock {
            stream: STREAM,
            flags: END_HEADERS,
            priority: Vec::new(),
            block: block.clone(),
        };
        let out = encode_block(&pending, &block);
        let first: [u8; FRAME_HEADER_LEN] = out[..FRAME_HEADER_LEN].try_into().expect("head");
        assert_eq!(
            (payload_len(&first), first[3], first[4]),
            (MAX_FRAME_PAYLOAD, HEADERS, 0)
        );
        let at = FRAME_HEADER_LEN + MAX_FRAME_PAYLOAD;
        let second: [u8; FRAME_HEADER_LEN] =
            out[at..at + FRAME_HEADER_LEN].try_into().expect("head");
        assert_eq!(
            (payload_len(&second), second[3], second[4]),
            (block.len() - MAX_FRAME_PAYLOAD, CONTINUATION, END_HEADERS)
        );
    }

    #[test]
    fn malformed_frames_are_errors() {
        let mut rewriter = RequestRewriter::default();
        let (head, payload) = frame(CONTINUATION, END_HEADERS, b"x");
        assert_eq!(
            rewriter.frame(head, &payload),
            Err(FrameError::StrayContinuation)
        );
        let (head, payload) = frame(HEADERS, END_HEADERS | PADDED, &[9, 1]);
        assert_eq!(
            rewriter.frame(head, &payload),
            Err(FrameError::BadHeadersFrame)
        );
    }
}
