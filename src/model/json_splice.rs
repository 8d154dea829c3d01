//! JSON lines with their big arrays written by hand, the rest by serde.
//!
//! Why: at 200 busy flows a `watch --json` line or a recorded interval is
//! ~400 KB, most of it the per-flow arrays (a snapshot's flows, an
//! analysis's attributions), and serde_json spends most of its time per
//! field, not per byte: every field name is scanned for characters to
//! escape and written in four small pieces. That was a fifth of the
//! observer's process time at a broker's scale (docs/performance.md,
//! "Fourth pass"). The hand writers ([`JsonObject`]) write each name with
//! its quotes and colon in one piece, and integers straight through `itoa`
//! (as serde_json does); floats, strings and nested types still go through
//! serde_json.
//!
//! How an array joins the rest of its line: while [`to_json_vec`] encodes,
//! a field whose `serialize_with` is its [`HandField`]'s serializes as a
//! placeholder string; the
//! array written by hand then replaces that string in the output. Strings
//! that come from elsewhere (states, owners, interface names) still go
//! through serde_json, so they are escaped exactly as before. Tests compare
//! the bytes with serde's.

use std::cell::Cell;

use serde::{Serialize, Serializer};

thread_local! {
    /// Set while [`to_json_vec`] encodes on this thread.
    static BY_HAND: Cell<bool> = const { Cell::new(false) };
}

/// A field written by hand: its name in the line, and the tag that tells
/// its placeholder from another field's.
#[derive(Clone, Copy)]
pub(crate) struct HandField {
    pub key: &'static str,
    pub tag: &'static str,
}

impl HandField {
    /// The string the field serializes as while [`to_json_vec`] encodes
    /// (with control characters, which serde_json escapes).
    fn placeholder(&self) -> String {
        format!("\u{1}throttlescope:{}\u{1}", self.tag)
    }

    /// For the field's `serialize_with`: the placeholder while
    /// [`to_json_vec`] encodes, else the items as serde writes them.
    pub(crate) fn serialize<S: Serializer, T: Serialize>(
        &self,
        items: &[T],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        if BY_HAND.with(Cell::get) {
            serializer.serialize_str(&self.placeholder())
        } else {
            items.serialize(serializer)
        }
    }

    /// The field, with what writes its value.
    pub(crate) fn written_by<'a>(
        self,
        write: &'a dyn Fn(&mut Vec<u8>) -> serde_json::Result<()>,
    ) -> HandWritten<'a> {
        HandWritten { field: self, write }
    }

    /// The field as serde_json writes it holding the placeholder. Only a
    /// key can be followed by `:`, and a string's own quotes are escaped,
    /// so a match is a field of this name holding the placeholder.
    fn needle(&self) -> serde_json::Result<Vec<u8>> {
        let mut needle = format!("\"{}\":", self.key).into_bytes();
        serde_json::to_writer(&mut needle, &self.placeholder())?;
        Ok(needle)
    }
}

/// Clears [`BY_HAND`] however the encoding ends.
struct ByHand;

impl ByHand {
    fn start() -> Self {
        BY_HAND.with(|f| f.set(true));
        ByHand
    }
}

impl Drop for ByHand {
    fn drop(&mut self) {
        BY_HAND.with(|f| f.set(false));
    }
}

/// A field written by hand, with what writes its value.
pub(crate) struct HandWritten<'a> {
    field: HandField,
    write: &'a dyn Fn(&mut Vec<u8>) -> serde_json::Result<()>,
}

/// `value` as JSON: the same bytes as `serde_json::to_vec(value)`, with each
/// of `parts` (in the order they come in the line; each at most once in
/// it) written by hand. `capacity`: the buffer's size to start with (the
/// last line's length, say).
pub(crate) fn to_json_vec<T: Serialize + ?Sized>(
    value: &T,
    parts: &[HandWritten],
    capacity: usize,
) -> serde_json::Result<Vec<u8>> {
    let rest = {
        let _by_hand = ByHand::start();
        let mut rest = Vec::with_capacity(capacity / 8 + 1024);
        serde_json::to_writer(&mut rest, value)?;
        rest
    };
    let mut out = Vec::with_capacity(capacity.max(rest.len()));
    let mut from = 0;
    for part in parts {
        let needle = part.field.needle()?;
        let Some(at) = memchr::memmem::find(&rest[from..], &needle).map(|i| from + i) else {
            continue; // not in this value
        };
        // The value goes where the placeholder string is, after `"key":`.
        let value_at = at + part.field.key.len() + 3;
        out.extend_from_slice(&rest[from..value_at]);
        (part.write)(&mut out)?;
        from = at + needle.len();
    }
    out.extend_from_slice(&rest[from..]);
    Ok(out)
}

/// A JSON object written a field at a time, as serde writes a struct: each
/// `key` is the field's name (plain ASCII here: nothing to escape).
pub(crate) struct JsonObject<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> JsonObject<'a> {
    #[inline]
    pub fn start(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        JsonObject { out, first: true }
    }

    /// Writes `"key":` (after a comma when not the first) and returns the
    /// buffer for the value.
    #[inline]
    pub fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    #[inline]
    pub fn u64(&mut self, key: &str, v: u64) {
        let out = self.key(key);
        out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }

    #[inline]
    pub fn u32(&mut self, key: &str, v: u32) {
        self.u64(key, v.into());
    }

    #[inline]
    pub fn opt_u32(&mut self, key: &str, v: Option<u32>) {
        match v {
            Some(v) => self.u32(key, v),
            None => self.key(key).extend_from_slice(b"null"),
        }
    }

    /// Through serde_json, whose float formatting (and `null` for what is
    /// not finite) is its own to change.
    #[inline]
    pub fn f64(&mut self, key: &str, v: f64) -> serde_json::Result<()> {
        self.serde(key, &v)
    }

    #[inline]
    pub fn opt_f64(&mut self, key: &str, v: Option<f64>) -> serde_json::Result<()> {
        self.serde(key, &v)
    }

    #[inline]
    pub fn bool(&mut self, key: &str, v: bool) {
        let text: &[u8] = if v { b"true" } else { b"false" };
        self.key(key).extend_from_slice(text);
    }

    /// Anything else (strings, addresses, owners) as serde_json writes it.
    #[inline]
    pub fn serde<T: Serialize + ?Sized>(&mut self, key: &str, v: &T) -> serde_json::Result<()> {
        serde_json::to_writer(&mut *self.key(key), v)
    }

    #[inline]
    pub fn end(self) {
        self.out.push(b'}');
    }
}

/// `items` as a JSON array, each written by `write`.
pub(crate) fn write_array<T>(
    out: &mut Vec<u8>,
    items: &[T],
    write: impl Fn(&mut Vec<u8>, &T) -> serde_json::Result<()>,
) -> serde_json::Result<()> {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(out, item)?;
    }
    out.push(b']');
    Ok(())
}
