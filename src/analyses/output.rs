//! What a registered analysis produces on a run ([`AnalysisOutput`]): its terminal text,
//! files and report sections, and how it is stored.

use crate::engine::value::Text;
use crate::report::Section;
use anyhow::{Result, anyhow, bail};
use serde::{Deserialize, Serialize};

/// The result of an analysis: its terminal text, files and report sections.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct AnalysisOutput {
    pub name: String,
    /// File name -> content, written under the output folder (e.g. `summary.json`).
    pub files: Vec<(String, Text)>,
    pub text: String,
    pub sections: Vec<Section>,
}
impl AnalysisOutput {
    /// The content of the file `name` written by one of `outputs`, if any.
    pub fn file_among<'a>(
        outputs: impl IntoIterator<Item = &'a AnalysisOutput>,
        name: &str,
    ) -> Option<&'a str> {
        outputs
            .into_iter()
            .flat_map(|o| o.files.iter())
            .find(|(n, _)| n == name)
            .map(|(_, c)| c.as_str())
    }
}

/// Stored as length-prefixed fields, not JSON: the files of an analysis can be megabytes of
/// text (flame graphs, folded stacks) that JSON would escape on the way in and out.
impl crate::engine::value::Value for AnalysisOutput {
    fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(
            64 + self.text.len()
                + self
                    .files
                    .iter()
                    .map(|(n, c)| n.len() + c.len() + 16)
                    .sum::<usize>(),
        );
        out.extend_from_slice(OUTPUT_MAGIC);
        let mut put = |b: &[u8]| {
            out.extend_from_slice(&(b.len() as u64).to_le_bytes());
            out.extend_from_slice(b);
        };
        put(self.name.as_bytes());
        put(self.text.as_bytes());
        put(&serde_json::to_vec(&self.sections)?);
        put(&(self.files.len() as u64).to_le_bytes());
        for (n, c) in &self.files {
            put(n.as_bytes());
            put(c.as_bytes());
        }
        Ok(out)
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        Self::decode_shared(bytes::Bytes::copy_from_slice(bytes))
    }

    /// The files are slices of `bytes`, not copies.
    fn decode_shared(bytes: bytes::Bytes) -> Result<Self> {
        if !bytes.starts_with(OUTPUT_MAGIC) {
            bail!("not a stored analysis output");
        }
        let mut at = OUTPUT_MAGIC.len();
        let mut take = || -> Result<bytes::Bytes> {
            let len: [u8; 8] = bytes
                .get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| anyhow!("truncated analysis output"))?;
            let len = usize::try_from(u64::from_le_bytes(len))?;
            let start = at + 8;
            let end = start
                .checked_add(len)
                .filter(|&e| e <= bytes.len())
                .ok_or_else(|| anyhow!("truncated analysis output"))?;
            at = end;
            Ok(bytes.slice(start..end))
        };
        let text = |b: bytes::Bytes| -> Result<String> { Ok(std::str::from_utf8(&b)?.to_string()) };
        let name = text(take()?)?;
        let out_text = text(take()?)?;
        let sections = serde_json::from_slice(&take()?)?;
        let n: [u8; 8] = take()?[..]
            .try_into()
            .map_err(|_| anyhow!("bad file count in analysis output"))?;
        let n = u64::from_le_bytes(n);
        let mut files = Vec::new();
        for _ in 0..n {
            let f = text(take()?)?;
            files.push((f, Text::from_shared(take()?)?));
        }
        Ok(AnalysisOutput {
            name,
            files,
            text: out_text,
            sections,
        })
    }
}

const OUTPUT_MAGIC: &[u8] = b"nsys-jax-pipe analysis output 2\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_outputs_round_trip() {
        use crate::engine::value::Value;
        let o = AnalysisOutput {
            name: "x".into(),
            files: vec![
                ("a.json".into(), "{\"é\": 1}".into()),
                ("b.svg".into(), String::new().into()),
            ],
            text: "line\n".into(),
            sections: vec![Section::new("x", "X")],
        };
        assert_eq!(AnalysisOutput::decode(&o.encode().unwrap()).unwrap(), o);
        let bytes = o.encode().unwrap();
        for cut in 0..bytes.len() {
            assert!(
                AnalysisOutput::decode(&bytes[..cut]).is_err(),
                "cut at {cut}"
            );
        }
    }
}
