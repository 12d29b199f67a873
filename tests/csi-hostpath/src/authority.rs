//! The kubelet's registration client sends the socket's path as the HTTP/2 `:authority`
//! (it dials the bare path; kubernetes#108254), which h2, under tonic, refuses as a
//! malformed authority (PROTOCOL_ERROR, hyperium/h2#487). node-driver-registrar is in Go,
//! whose server accepts it. So the registration socket's connections pass through this
//! rewrite, which sets `:authority` to `localhost` in the requests' header blocks and
//! copies everything else unchanged.
//!
//! The rewrite keeps HPACK's dynamic table in step without decoding Huffman strings: a
//! field keeps its representation (an indexed `:authority` added to the table is still
//! added, with the shorter value), so the server's table holds an entry at every index the
//! client's does, and only ever evicts later (its entries are smaller), never sooner.

use thiserror::Error;

/// The HTTP/2 client connection preface (RFC 9113, 3.4), sent before the first frame.
pub const CLIENT_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// What `:authority` becomes: what grpc-go itself sends for a `unix://` target.
const AUTHORITY: &[u8] = b"localhost";
/// `:authority` in HPACK's static table (RFC 7541, appendix A).
const AUTHORITY_INDEX: u64 = 1;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum HpackError {
    #[error("a header block ends inside a field")]
    Truncated,
    #[error("a header block has an integer too large for HPACK")]
    IntegerOverflow,
}

/// A representation's kind, from its first byte (RFC 7541, 6): its integer's prefix bits,
/// whether it carries a name and value, and the pattern bits to write back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Kind {
    prefix_bits: u8,
    pattern: u8,
    literal: bool,
}

fn kind(first: u8) -> Kind {
    let (prefix_bits, pattern, literal) = match first {
        b if b & 0x80 != 0 => (7, 0x80, false),    // indexed field
        b if b & 0xc0 == 0x40 => (6, 0x40, true),  // literal, incremental indexing
        b if b & 0xe0 == 0x20 => (5, 0x20, false), // dynamic table size update
        b => (4, b & 0xf0, true),                  // literal, without / never indexed
    };
    Kind {
        prefix_bits,
        pattern,
        literal,
    }
}

/// Reads an HPACK integer with an N-bit prefix at `block[*at]`, advancing `at`.
fn read_integer(block: &[u8], at: &mut usize, prefix_bits: u8) -> Result<u64, HpackError> {
    let max = (1u64 << prefix_bits) - 1;
    let first = *block.get(*at).ok_or(HpackError::Truncated)?;
    *at += 1;
    let mut value = u64::from(first) & max;
    if value < max {
        return Ok(value);
    }
    for shift in (0..63).step_by(7) {
        let byte = *block.get(*at).ok_or(HpackError::Truncated)?;
        *at += 1;
        value += u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(HpackError::IntegerOverflow)
}

fn write_integer(out: &mut Vec<u8>, pattern: u8, prefix_bits: u8, value: u64) {
    let max = (1u64 << prefix_bits) - 1;
    if value < max {
        out.push(pattern | value as u8);
        return;
    }
    out.push(pattern | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        out.push((rest & 0x7f) as u8 | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// The byte range of the string literal at `block[*at]` (length prefix included).
fn skip_string(block: &[u8], at: &mut usize) -> Result<std::ops::Range<usize>, HpackError> {
    let start = *at;
    let len = read_integer(block, at, 7)?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|len| at.checked_add(len))
        .filter(|end| *end <= block.len())
        .ok_or(HpackError::Truncated)?;
    *at = end;
    Ok(start..end)
}

/// Whether the literal name at `range` is `:authority` written out (not Huffman-coded).
fn names_authority(block: &[u8], range: std::ops::Range<usize>) -> bool {
    block[range] == *b"\x0a:authority"
}

/// The header block with every `:authority` value replaced by `localhost`.
pub fn rewrite_header_block(block: &[u8]) -> Result<Vec<u8>, HpackError> {
    let mut out = Vec::with_capacity(block.len());
    let mut at = 0;
    while at < block.len() {
        let start = at;
        let kind = kind(block[at]);
        let index = read_integer(block, &mut at, kind.prefix_bits)?;
        if !kind.literal {
            out.extend_from_slice(&block[start..at]);
            continue;
        }
        let name = if index == 0 {
            Some(skip_string(block, &mut at)?)
        } else {
            None
        };
        let value = skip_string(block, &mut at)?;
        let is_authority = match &name {
            None => index == AUTHORITY_INDEX,
            Some(range) => names_authority(block, range.clone()),
        };
        if !is_authority {
            out.extend_from_slice(&block[start..at]);
            continue;
        }
        write_integer(&mut out, kind.pattern, kind.prefix_bits, index);
        if let Some(range) = name {
            out.extend_from_slice(&block[range]);
        }
        write_integer(&mut out, 0, 7, AUTHORITY.len() as u64);
        out.extend_from_slice(AUTHORITY);
        debug_assert_eq!(value.end, at);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn literal(s: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        write_integer(&mut out, 0, 7, s.len() as u64);
        out.extend_from_slice(s);
        out
    }

    fn concat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    #[test]
    fn integers_round_trip_across_the_prefix_boundary() {
        for prefix_bits in [4u8, 5, 6, 7] {
            for value in [
                0u64,
                1,
                14,
                15,
                30,
                31,
                62,
                63,
                126,
                127,
                128,
                1337,
                1 << 20,
            ] {
                let mut out = Vec::new();
                write_integer(&mut out, 0, prefix_bits, value);
                let mut at = 0;
                assert_eq!(
                    read_integer(&out, &mut at, prefix_bits),
                    Ok(value),
                    "{prefix_bits} {value}"
                );
                assert_eq!(at, out.len());
            }
        }
        // RFC 7541, C.1.2: 1337 with a 5-bit prefix.
        let mut out = Vec::new();
        write_integer(&mut out, 0, 5, 1337);
        assert_eq!(out, [0x1f, 0x9a, 0x0a]);
    }

    #[test]
    fn authority_values_become_localhost_in_every_representation() {
        let path = literal(b"/var/lib/kubelet/plugins_registry/x-reg.sock");
        let localhost = literal(b"localhost");
        let huffman_path = [0x83, 0xaa, 0xbb, 0xcc]; // an opaque Huffman-coded value
        let cases: [(&str, Vec<u8>, Vec<u8>); 6] = [
            (
                "incremental indexing, indexed name",
                concat(&[&[0x41], &path]),
                concat(&[&[0x41], &localhost]),
            ),
            (
                "without indexing, indexed name",
                concat(&[&[0x01], &path]),
                concat(&[&[0x01], &localhost]),
            ),
            (
                "never indexed, indexed name",
                concat(&[&[0x11], &path]),
                concat(&[&[0x11], &localhost]),
            ),
            (
                "Huffman-coded value",
                concat(&[&[0x41], &huffman_path]),
                concat(&[&[0x41], &localhost]),
            ),
            (
                "literal name",
                concat(&[&[0x40], &literal(b":authority"), &path]),
                concat(&[&[0x40], &literal(b":authority"), &localhost]),
            ),
            (
                "among other fields, which are copied",
                concat(&[
                    &[0x83, 0x86],
                    &[0x41],
                    &path,
                    &[0x44],
                    &literal(b"/pluginregistration.Registration/GetInfo"),
                    &[0xbe],
                ]),
                concat(&[
                    &[0x83, 0x86],
                    &[0x41],
                    &localhost,
                    &[0x44],
                    &literal(b"/pluginregistration.Registration/GetInfo"),
                    &[0xbe],
                ]),
            ),
        ];
        for (name, block, want) in cases {
            assert_eq!(rewrite_header_block(&block), Ok(want), "{name}");
        }
    }

    #[test]
    fn other_fields_and_table_size_updates_pass_unchanged() {
        let block = concat(&[
            &[0x3f, 0xe1, 0x1f],
            &[0x82],
            &[0x5f],
            &literal(b"application/grpc"),
        ]);
        assert_eq!(rewrite_header_block(&block), Ok(block.clone()));
    }

    #[test]
    fn a_truncated_block_is_an_error() {
        assert_eq!(
            rewrite_header_block(&[0x41, 0x05, b'a']),
            Err(HpackError::Truncated)
        );
        assert_eq!(rewrite_header_block(&[0x7f]), Err(HpackError::Truncated));
    }
}
