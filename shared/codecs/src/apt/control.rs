//! The `control` file of a binary package: fields, and the rules for name, version and
//! architecture.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    pub package: String,
    pub version: String,
    pub architecture: String,
    /// The source package name (the `Source` field without a version), else the package name.
    pub source: String,
    /// The control file as uploaded, trimmed: it becomes the start of the `Packages` stanza.
    pub text: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ControlError {
    #[error("malformed line {0}: expected `Field: value` or an indented continuation")]
    Syntax(usize),
    #[error("line {0} is blank or only white space, which would end the stanza: write an empty line of a multi-line value as \" .\"")]
    Blank(usize),
    #[error("the required field {0} is missing")]
    Missing(&'static str),
    #[error(
        "the field Package is invalid: {0:?} is not a package name (lowercase letters, digits, '+', '-' and '.', starting with a letter or digit)"
    )]
    Name(String),
    #[error(
        "the field Version is invalid: {0:?} is not [epoch:]upstream[-revision] with upstream starting with a digit"
    )]
    Version(String),
    #[error("the field Architecture is invalid: {0:?} is not an architecture name")]
    Architecture(String),
    #[error("the field {0} appears twice")]
    Duplicate(String),
    /// Any other field a client parses, by its grammar (`fields`).
    #[error("{0}")]
    Field(super::fields::FieldError),
}

impl From<super::fields::FieldError> for ControlError {
    fn from(e: super::fields::FieldError) -> Self {
        use super::fields::FieldError;
        match e {
            FieldError::Syntax(n) => Self::Syntax(n),
            FieldError::Blank(n) => Self::Blank(n),
            FieldError::Duplicate(name) => Self::Duplicate(name),
            other => Self::Field(other),
        }
    }
}

pub use super::fields::{valid_name, valid_version};

/// An architecture token: `all`, `amd64`, `arm64`, `linux-any`-style names.
pub fn valid_architecture(a: &str) -> bool {
    !a.is_empty() && a.len() <= 64 && a.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

impl Control {
    /// A `.deb`'s control file, checked field by field as dpkg and Debian policy read it
    /// (`fields::check_binary`): what is accepted can be published in a `Packages` index.
    pub fn parse(text: &str) -> Result<Self, ControlError> {
        let text = text.trim_matches(|c| c == '\n' || c == '\r').replace("\r\n", "\n");
        let parsed = super::fields::paragraph(&text)?;
        super::fields::check_binary(&parsed, super::fields::Mode::Policy)?;
        let fields: Vec<(String, String)> = parsed.iter().map(|f| (f.name.to_string(), f.value.clone())).collect();
        let get = |f: &'static str| {
            fields.iter().find(|(n, _)| n.eq_ignore_ascii_case(f)).map(|(_, v)| v.clone()).filter(|v| !v.is_empty())
        };
        let package = get("Package").ok_or(ControlError::Missing("Package"))?;
        let version = get("Version").ok_or(ControlError::Missing("Version"))?;
        let architecture = get("Architecture").ok_or(ControlError::Missing("Architecture"))?;
        if !valid_name(&package) {
            return Err(ControlError::Name(package));
        }
        if !valid_version(&version) {
            return Err(ControlError::Version(version));
        }
        if !valid_architecture(&architecture) {
            return Err(ControlError::Architecture(architecture));
        }
        let source = match get("Source") {
            Some(s) => {
                let name = s.split_whitespace().next().unwrap_or_default().to_string();
                if !valid_name(&name) {
                    return Err(ControlError::Name(name));
                }
                name
            }
            None => package.clone(),
        };
        // The stanza keeps the uploaded text; Filename, Size and hashes are ours to add.
        for ours in ["Filename", "Size", "MD5sum", "SHA1", "SHA256", "SHA512"] {
            if fields.iter().any(|(n, _)| n.eq_ignore_ascii_case(ours)) {
                return Err(ControlError::Duplicate(format!("{ours} (set by the repository, not the package)")));
            }
        }
        Ok(Self { package, version, architecture, source, text: text.clone() })
    }

    /// `pool/<component>/<prefix>/<source>/<name>_<version without epoch>_<arch>.deb`, where the
    /// prefix is the source's first letter, or its first four for `lib*`.
    pub fn pool_path(&self, component: &str) -> String {
        let prefix =
            if self.source.starts_with("lib") && self.source.len() > 3 { &self.source[..4] } else { &self.source[..1] };
        let version = self.version.split_once(':').map_or(self.version.as_str(), |(_, v)| v);
        format!("pool/{component}/{prefix}/{}/{}_{version}_{}.deb", self.source, self.package, self.architecture)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_versions() {
        for ok in ["hello", "libc6", "g++", "python3.11", "0ad"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "a", "Hello", "-x", "a_b", "a b", "ü-x"] {
            assert!(!valid_name(bad), "{bad}");
        }
        for ok in ["1.0", "1:2.10-3", "2.10-3ubuntu1", "1.0~rc1", "1.2.3+dfsg-1", "0:1-1-1", "3:1.0:2-1"] {
            assert!(valid_version(ok), "{ok}");
        }
        for bad in ["", "a1.0", ":1.0", "1.0-", "x:1.0", "1.0 beta", "1.0-1_2", "1:"] {
            assert!(!valid_version(bad), "{bad}");
        }
    }

    #[test]
    fn parses_and_places_in_the_pool() -> Result<(), ControlError> {
        let c = Control::parse(
            "Package: libfoo1\nSource: libfoo (1.2-1)\nVersion: 2:1.2-1\nArchitecture: arm64\nDescription: x\n long\n",
        )?;
        assert_eq!(c.source, "libfoo");
        assert_eq!(c.pool_path("main"), "pool/main/libf/libfoo/libfoo1_1.2-1_arm64.deb");
        let c = Control::parse("Package: hello\nVersion: 1.0\nArchitecture: all\n")?;
        assert_eq!(c.pool_path("contrib"), "pool/contrib/h/hello/hello_1.0_all.deb");
        Ok(())
    }

    #[test]
    fn rejects_what_would_corrupt_an_index() {
        assert_eq!(Control::parse("Version: 1.0\nArchitecture: all\n"), Err(ControlError::Missing("Package")));
        assert_eq!(Control::parse("Package: a1\n\nVersion: 1\nArchitecture: all"), Err(ControlError::Blank(2)));
        // Found by the deb fuzz target: a continuation line of only white space.
        for blank in [" ", "\t", " \t ", " \r"] {
            assert_eq!(
                Control::parse(&format!("Package: a1\nDescription: x\n y\n{blank}\n .\nVersion: 1\nArchitecture: all")),
                Err(ControlError::Blank(4)),
                "{blank:?}"
            );
        }
        assert_eq!(Control::parse(" leading\nPackage: a1"), Err(ControlError::Syntax(1)));
        assert!(matches!(
            Control::parse("Package: a1\nPackage: a2\nVersion: 1\nArchitecture: all"),
            Err(ControlError::Duplicate(_))
        ));
        assert!(matches!(
            Control::parse("Package: a1\nVersion: 1\nArchitecture: all\nSHA256: 00"),
            Err(ControlError::Duplicate(_))
        ));
        assert_eq!(
            Control::parse("Package: a1\nVersion: 1\nArchitecture: AMD64"),
            Err(ControlError::Architecture("AMD64".into()))
        );
    }
}
