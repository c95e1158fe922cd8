//! A single-pass scanner for the common shape of a successful `query_range`/`query` answer:
//! compact or spaced JSON, strings without escapes. At fleet scale an answer is 45 MB and
//! serde's generic visitors were the largest stage of a tick; this reads the same bytes into
//! the same [`RangeSeries`] about twice as fast.
//!
//! It gives up (returns `None`) on anything else — an escape, an unknown key, an error answer,
//! a partial answer, malformed JSON — and the caller decodes the body with serde, which then
//! produces the answer or the error. So the scanner only has to be right on what it accepts: a
//! test compares both decoders on answers of every shape.

use std::borrow::Cow;

use super::{parse_value, Decoded, RangeSeries};

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

type Scan<T> = Option<T>;

impl<'a> Scanner<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// Skips whitespace and consumes `byte`.
    fn eat(&mut self, byte: u8) -> Scan<()> {
        self.ws();
        (self.bytes.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    /// Skips whitespace; true (and consumed) when the next byte is `byte`.
    fn next_is(&mut self, byte: u8) -> bool {
        self.ws();
        let yes = self.bytes.get(self.at) == Some(&byte);
        if yes {
            self.at += 1;
        }
        yes
    }

    /// A string without escapes or control characters, borrowed.
    fn string(&mut self) -> Scan<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        loop {
            match *self.bytes.get(self.at)? {
                b'"' => break,
                b'\\' | 0..=0x1f => return None,
                _ => self.at += 1,
            }
        }
        let s = std::str::from_utf8(&self.bytes[start..self.at]).ok()?;
        self.at += 1;
        Some(s)
    }

    /// A JSON number (strict grammar), as text.
    fn number(&mut self) -> Scan<&'a str> {
        self.ws();
        let start = self.at;
        let digits = |s: &mut Self| {
            let from = s.at;
            while s.bytes.get(s.at).is_some_and(u8::is_ascii_digit) {
                s.at += 1;
            }
            s.at > from
        };
        if self.bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        match self.bytes.get(self.at) {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return None,
        }
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            digits(self).then_some(())?;
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.at) {
            self.at += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.at) {
                self.at += 1;
            }
            digits(self).then_some(())?;
        }
        std::str::from_utf8(&self.bytes[start..self.at]).ok()
    }

    /// `[time, "value"]`.
    fn point(&mut self) -> Scan<(i64, f64)> {
        self.eat(b'[')?;
        let t: f64 = self.number()?.parse().ok()?;
        self.eat(b',')?;
        let value = parse_value(self.string()?).ok()?;
        self.eat(b']')?;
        Some(((t * 1000.0).round() as i64, value))
    }

    /// Calls `each` for every element of an array (`[` not yet consumed).
    fn array(&mut self, mut each: impl FnMut(&mut Self) -> Scan<()>) -> Scan<()> {
        self.eat(b'[')?;
        if self.next_is(b']') {
            return Some(());
        }
        loop {
            each(self)?;
            if self.next_is(b']') {
                return Some(());
            }
            self.eat(b',')?;
        }
    }

    /// Calls `each(key)` for every member of an object (`{` not yet consumed), positioned at
    /// the member's value.
    fn object(&mut self, mut each: impl FnMut(&mut Self, &'a str) -> Scan<()>) -> Scan<()> {
        self.eat(b'{')?;
        if self.next_is(b'}') {
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            each(self, key)?;
            if self.next_is(b'}') {
                return Some(());
            }
            self.eat(b',')?;
        }
    }

    fn series(&mut self) -> Scan<RangeSeries<'a>> {
        let mut out = RangeSeries {
            labels: Vec::new(),
            points: Vec::new(),
        };
        self.object(|s, key| {
            match key {
                "metric" => {
                    let mut labels = Vec::with_capacity(4);
                    s.object(|s, name| {
                        labels.push((Cow::Borrowed(name), Cow::Borrowed(s.string()?)));
                        Some(())
                    })?;
                    out.labels = labels;
                }
                "values" => {
                    let mut points = Vec::with_capacity(1);
                    s.array(|s| {
                        points.push(s.point()?);
                        Some(())
                    })?;
                    out.points = points;
                }
                "value" => out.points = vec![s.point()?],
                _ => return None,
            }
            Some(())
        })?;
        Some(out)
    }
}

/// The answer, when it has the common shape (see the module comment).
pub(super) fn decode(body: &[u8]) -> Option<Decoded<'_>> {
    let mut s = Scanner { bytes: body, at: 0 };
    let mut success = false;
    let mut result_type_ok = false;
    let mut series = None;
    let mut warnings = Vec::new();
    // serde refuses a duplicate field of the answer or of its data: so does this (by declining).
    let mut seen = 0u8;
    let mut once = |bit: u8| -> Scan<()> {
        (seen & bit == 0).then_some(())?;
        seen |= bit;
        Some(())
    };
    s.object(|s, key| {
        once(match key {
            "status" => 1,
            "isPartial" => 2,
            "warnings" => 4,
            "data" => 8,
            "resultType" => 16,
            "result" => 32,
            _ => return None,
        })?;
        match key {
            "status" => success = s.string()? == "success",
            "isPartial" => {
                // `false` only: a partial answer is refused by the serde path, with its message.
                s.ws();
                s.bytes[s.at..].starts_with(b"false").then(|| s.at += 5)?;
            }
            "warnings" => {
                s.array(|s| {
                    warnings.push(s.string()?.to_string());
                    Some(())
                })?;
            }
            "data" => s.object(|s, key| {
                once(match key {
                    "resultType" => 16,
                    "result" => 32,
                    _ => return None,
                })?;
                match key {
                    "resultType" => {
                        result_type_ok = matches!(s.string()?, "matrix" | "vector");
                    }
                    "result" => {
                        let mut all = Vec::new();
                        s.array(|s| {
                            all.push(s.series()?);
                            Some(())
                        })?;
                        series = Some(all);
                    }
                    _ => return None,
                }
                Some(())
            })?,
            _ => return None,
        }
        Some(())
    })?;
    s.ws();
    (s.at == body.len() && success && result_type_ok).then_some(())?;
    Some(Decoded {
        series: series?,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::super::decode_answer_with_serde;
    use super::*;

    #[test]
    fn same_as_serde_where_it_decodes_and_declines_the_rest() {
        let decoded = [
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"node":"a","feature":"x"},"values":[[1790000000,"1.5"],[1790000001.123,"NaN"],[1790000002.5,"+Inf"]]},{"metric":{},"values":[]}]}}"#,
            "{ \"status\" : \"success\" ,\n \"warnings\": [\"w1\", \"w2\"], \"isPartial\": false,\r\n\t\"data\": { \"result\": [ { \"values\": [ [ 1e3 , \"-Inf\" ] ], \"metric\": { \"b\": \"\u{e9}\", \"a\": \"2\" } } ], \"resultType\": \"matrix\" } } ",
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"node":"a"},"value":[1790000000.001,"-0.25e-3"]}]}}"#,
            r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
        ];
        for body in decoded {
            let fast = decode(body.as_bytes()).expect(body);
            let serde = decode_answer_with_serde(body.as_bytes()).expect(body);
            // Debug text: NaN compares equal to itself there, and -0.0 differs from 0.0.
            assert_eq!(format!("{fast:?}"), format!("{serde:?}"), "{body}");
        }
        let declined = [
            // Escapes, unknown keys, errors, partial answers, other result types.
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"node":"a\"b"},"values":[]}]}}"#,
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[],"histograms":[]}]}}"#,
            r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
            r#"{"status":"success","isPartial":true,"data":{"resultType":"matrix","result":[]}}"#,
            r#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}"#,
            // Malformed JSON.
            r#"{"status":"success","data":{"resultType":"matrix","result":[]}}x"#,
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[01,"1"]]}]}}"#,
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1.,"1"]]}]}}"#,
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"one"]]}]}}"#,
            r#"{"status":"success","data":{"resultType":"matrix","result":[,]}}"#,
            r#"{"status":"success","data":{"resultType":"matrix","result":[]}"#,
            "",
        ];
        for body in declined {
            assert!(decode(body.as_bytes()).is_none(), "{body}");
        }
    }
}
