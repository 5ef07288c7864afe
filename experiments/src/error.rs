//! Errors in a sweep spec, each pointing at the file, line and key at fault.

use std::fmt;

/// One problem in a spec: where it is and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// The spec file as the user named it.
    pub file: String,
    /// 1-based line, when the problem has one.
    pub line: Option<usize>,
    /// The key at fault, as written in the spec.
    pub key: Option<String>,
    pub message: String,
}

impl SpecError {
    pub fn new(
        file: &str,
        line: Option<usize>,
        key: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        SpecError {
            file: file.to_string(),
            line,
            key: key.map(str::to_string),
            message: message.into(),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        write!(f, ": ")?;
        if let Some(k) = &self.key {
            write!(f, "key '{k}': ")?;
        }
        write!(f, "{}", self.message)
    }
}

/// Every problem found in a spec, in file order, so that one edit fixes them all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SpecErrors(pub Vec<SpecError>);

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl SpecErrors {
    /// `Ok(())` when empty; otherwise the errors sorted by line.
    pub fn into_result(mut self) -> Result<(), SpecErrors> {
        if self.0.is_empty() {
            return Ok(());
        }
        self.0.sort_by_key(|e| e.line.unwrap_or(0));
        self.0.dedup();
        Err(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_file_line_and_key() {
        let e = SpecError::new("s.toml", Some(7), Some("ranks"), "axis has no values");
        assert_eq!(e.to_string(), "s.toml:7: key 'ranks': axis has no values");
        let e = SpecError::new("s.toml", None, None, "empty");
        assert_eq!(e.to_string(), "s.toml: empty");
    }
}
