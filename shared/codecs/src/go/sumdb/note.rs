//! Signed notes (`golang.org/x/mod/sumdb/note`): a text ending in a newline, a blank line, then
//! one line per signature, `— <name> <base64(key hash ‖ Ed25519 signature)>`, the key hash
//! being the first four bytes (big-endian) of SHA-256(`<name>\n` ‖ 0x01 ‖ public key).
//!
//! Keys travel as strings: the verifier key `<name>+<hash>+<base64(0x01 ‖ public key)>` (what a
//! client puts in `GOSUMDB`) and the private key
//! `PRIVATE+KEY+<name>+<hash>+<base64(0x01 ‖ seed)>`.

use std::fmt;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _, VerifyingKey};
use rand::RngCore as _;
use sha2::{Digest, Sha256};

use super::BASE64_LENIENT;

/// The algorithm byte of an Ed25519 key, the only kind there is.
const ALG_ED25519: u8 = 1;

/// Starts a signature line: an em dash (U+2014) and a space.
const SIGNATURE_PREFIX: &str = "\u{2014} ";

/// The go command refuses a note with more signatures than this.
const MAX_SIGNATURES: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    #[error("invalid key name {0:?}: a name is non-empty and has no spaces or '+'")]
    InvalidName(String),
    #[error("malformed {kind} key: {why}")]
    MalformedKey { kind: &'static str, why: String },
    #[error("unknown key algorithm {0} (only Ed25519, algorithm 1, is known)")]
    UnknownAlgorithm(u8),
    #[error("the {kind} key's hash {given:08x} does not match its key (which hashes to {actual:08x})")]
    KeyHashMismatch { kind: &'static str, given: u32, actual: u32 },
    #[error("malformed note: {0}")]
    Malformed(&'static str),
    #[error("the note has no signature by key {0}")]
    NotSigned(String),
    #[error("invalid signature for key {0}")]
    BadSignature(String),
}

fn malformed_key(kind: &'static str, why: impl Into<String>) -> NoteError {
    NoteError::MalformedKey { kind, why: why.into() }
}

fn is_valid_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('+') && !name.chars().any(char::is_whitespace)
}

fn check_name(name: &str) -> Result<(), NoteError> {
    if is_valid_name(name) {
        Ok(())
    } else {
        Err(NoteError::InvalidName(name.into()))
    }
}

fn key_hash(name: &str, public_key: &VerifyingKey) -> u32 {
    let sum = Sha256::new()
        .chain_update(name.as_bytes())
        .chain_update(b"\n")
        .chain_update([ALG_ED25519])
        .chain_update(public_key.as_bytes())
        .finalize();
    u32::from_be_bytes([sum[0], sum[1], sum[2], sum[3]])
}

/// `<name>+<8 hex digits>+<base64 of the algorithm byte and 32 bytes>`, split and decoded (the
/// base64 may itself hold '+', so the key data is whatever follows the second '+').
fn split_key<'a>(kind: &'static str, s: &'a str) -> Result<(&'a str, u32, [u8; 32]), NoteError> {
    let mut parts = s.splitn(3, '+');
    let (Some(name), Some(hash), Some(data)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(malformed_key(kind, "expected <name>+<hash>+<key data>"));
    };
    check_name(name)?;
    if hash.len() != 8 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(malformed_key(kind, "the key hash is not 8 hexadecimal digits"));
    }
    let hash = u32::from_str_radix(hash, 16).map_err(|_| malformed_key(kind, "the key hash is not hexadecimal"))?;
    let data = BASE64_LENIENT.decode(data).map_err(|_| malformed_key(kind, "the key data is not base64"))?;
    let (&alg, key) = data.split_first().ok_or_else(|| malformed_key(kind, "the key data is empty"))?;
    if alg != ALG_ED25519 {
        return Err(NoteError::UnknownAlgorithm(alg));
    }
    let key =
        key.try_into().map_err(|_| malformed_key(kind, format!("an Ed25519 key is 32 bytes, not {}", key.len())))?;
    Ok((name, hash, key))
}

fn key_data(key: &[u8; 32]) -> String {
    let mut data = Vec::with_capacity(33);
    data.push(ALG_ED25519);
    data.extend_from_slice(key);
    BASE64.encode(data)
}

/// A server's signing key, by name. Its `Debug` shows the name and key hash only.
#[derive(Clone)]
pub struct Signer {
    name: String,
    key_hash: u32,
    key: SigningKey,
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signer({}+{:08x})", self.name, self.key_hash)
    }
}

impl Signer {
    /// A new random key.
    pub fn generate(name: &str) -> Result<Self, NoteError> {
        let mut seed = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut seed);
        Self::from_seed(name, seed)
    }

    pub fn from_seed(name: &str, seed: [u8; 32]) -> Result<Self, NoteError> {
        check_name(name)?;
        let key = SigningKey::from_bytes(&seed);
        Ok(Self { name: name.into(), key_hash: key_hash(name, &key.verifying_key()), key })
    }

    /// Reads a private key string, `PRIVATE+KEY+<name>+<hash>+<key data>`.
    pub fn parse(private_key: &str) -> Result<Self, NoteError> {
        const KIND: &str = "private";
        let rest = private_key
            .strip_prefix("PRIVATE+KEY+")
            .ok_or_else(|| malformed_key(KIND, "expected PRIVATE+KEY+<name>+<hash>+<key data>"))?;
        let (name, given, seed) = split_key(KIND, rest)?;
        let signer = Self::from_seed(name, seed)?;
        if signer.key_hash != given {
            return Err(NoteError::KeyHashMismatch { kind: KIND, given, actual: signer.key_hash });
        }
        Ok(signer)
    }

    /// The private key string; keep it secret.
    pub fn private_key(&self) -> String {
        format!("PRIVATE+KEY+{}+{:08x}+{}", self.name, self.key_hash, key_data(self.key.as_bytes()))
    }

    pub fn verifier(&self) -> Verifier {
        Verifier { name: self.name.clone(), key_hash: self.key_hash, key: self.key.verifying_key() }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn key_hash(&self) -> u32 {
        self.key_hash
    }

    /// The signed note: `text` (which must end in a newline), a blank line and this key's
    /// signature line.
    pub fn sign(&self, text: &str) -> Result<String, NoteError> {
        if !text.ends_with('\n') {
            return Err(NoteError::Malformed("the text must end in a newline"));
        }
        if text.chars().any(|c| c < ' ' && c != '\n') {
            return Err(NoteError::Malformed("the text must not contain control characters"));
        }
        let mut sig = Vec::with_capacity(4 + 64);
        sig.extend_from_slice(&self.key_hash.to_be_bytes());
        sig.extend_from_slice(&self.key.sign(text.as_bytes()).to_bytes());
        Ok(format!("{text}\n{SIGNATURE_PREFIX}{} {}\n", self.name, BASE64.encode(sig)))
    }
}

/// A public key that checks signed notes. Its `Display` is the verifier key string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verifier {
    name: String,
    key_hash: u32,
    key: VerifyingKey,
}

impl fmt::Display for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}+{:08x}+{}", self.name, self.key_hash, key_data(self.key.as_bytes()))
    }
}

impl Verifier {
    /// Reads a verifier key string, `<name>+<hash>+<key data>`.
    pub fn parse(verifier_key: &str) -> Result<Self, NoteError> {
        const KIND: &str = "verifier";
        let (name, given, key) = split_key(KIND, verifier_key)?;
        let key = VerifyingKey::from_bytes(&key).map_err(|_| malformed_key(KIND, "not an Ed25519 public key"))?;
        let actual = key_hash(name, &key);
        if actual != given {
            return Err(NoteError::KeyHashMismatch { kind: KIND, given, actual });
        }
        Ok(Self { name: name.into(), key_hash: actual, key })
    }

    pub fn from_public_key(name: &str, public_key: [u8; 32]) -> Result<Self, NoteError> {
        check_name(name)?;
        let key = VerifyingKey::from_bytes(&public_key)
            .map_err(|_| malformed_key("verifier", "not an Ed25519 public key"))?;
        Ok(Self { name: name.into(), key_hash: key_hash(name, &key), key })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn key_hash(&self) -> u32 {
        self.key_hash
    }

    pub fn public_key(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    /// Checks a signed note and returns its text. The note must be well formed as the go
    /// command reads one and carry a valid signature by this key; signatures by other keys are
    /// ignored.
    pub fn open<'a>(&self, note: &'a str) -> Result<&'a str, NoteError> {
        if note.chars().any(|c| c < ' ' && c != '\n') {
            return Err(NoteError::Malformed("control characters"));
        }
        let split = note.rfind("\n\n").ok_or(NoteError::Malformed("no blank line before the signatures"))?;
        let (text, signatures) = (&note[..split + 1], &note[split + 2..]);
        if signatures.is_empty() || !signatures.ends_with('\n') {
            return Err(NoteError::Malformed("the signatures must end in a newline"));
        }
        let mut ours = None;
        for (count, line) in signatures.lines().enumerate() {
            if count >= MAX_SIGNATURES {
                return Err(NoteError::Malformed("too many signatures"));
            }
            let line = line
                .strip_prefix(SIGNATURE_PREFIX)
                .ok_or(NoteError::Malformed("a signature line must start with an em dash and a space"))?;
            let (name, sig) = line.split_once(' ').unwrap_or((line, ""));
            let sig = BASE64_LENIENT.decode(sig).ok().filter(|s| s.len() >= 5 && is_valid_name(name));
            let sig = sig.ok_or(NoteError::Malformed("a signature line must be `— <name> <base64 signature>`"))?;
            let hash = u32::from_be_bytes([sig[0], sig[1], sig[2], sig[3]]);
            if ours.is_none() && name == self.name && hash == self.key_hash {
                ours = Some(sig);
            }
        }
        let id = || format!("{}+{:08x}", self.name, self.key_hash);
        let sig = ours.ok_or_else(|| NoteError::NotSigned(id()))?;
        let sig = Signature::from_slice(&sig[4..]).map_err(|_| NoteError::BadSignature(id()))?;
        self.key.verify(text.as_bytes(), &sig).map_err(|_| NoteError::BadSignature(id()))?;
        Ok(text)
    }
}

/// A new key pair: the private key string and the verifier key string.
pub fn generate_key(name: &str) -> Result<(String, String), NoteError> {
    let signer = Signer::generate(name)?;
    Ok((signer.private_key(), signer.verifier().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    // x/mod note's test keys and signed note.
    const PETER_PRIVATE: &str = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
    const PETER: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
    const ENOCH: &str = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop";
    const TEXT: &str =
        "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
    const PETER_SIG: &str =
        "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";
    const ENOCH_SIG: &str =
        "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n";

    #[test]
    fn known_keys_and_signature() -> Result<(), NoteError> {
        let signer = Signer::parse(PETER_PRIVATE)?;
        assert_eq!((signer.name(), signer.key_hash()), ("PeterNeumann", 0xc74f_20a3));
        assert_eq!(signer.private_key(), PETER_PRIVATE);
        assert_eq!(signer.verifier().to_string(), PETER);
        assert_eq!(format!("{signer:?}"), "Signer(PeterNeumann+c74f20a3)");
        // Ed25519 signatures are deterministic: the same bytes as the go implementation's.
        assert_eq!(signer.sign(TEXT)?, format!("{TEXT}\n{PETER_SIG}"));

        let peter = Verifier::parse(PETER)?;
        assert_eq!(peter, signer.verifier());
        assert_eq!(peter.open(&format!("{TEXT}\n{PETER_SIG}")), Ok(TEXT));
        // Another key's signature is ignored, before or after ours.
        assert_eq!(peter.open(&format!("{TEXT}\n{ENOCH_SIG}{PETER_SIG}")), Ok(TEXT));
        let enoch = Verifier::parse(ENOCH)?;
        assert_eq!(enoch.open(&format!("{TEXT}\n{PETER_SIG}{ENOCH_SIG}")), Ok(TEXT));
        assert_eq!(enoch.open(&format!("{TEXT}\n{PETER_SIG}")), Err(NoteError::NotSigned("EnochRoot+af0cfe78".into())));
        Ok(())
    }

    #[test]
    fn mangled_keys_are_refused() {
        assert!(Verifier::parse(PETER).is_ok());
        let bytes = PETER.as_bytes();
        for i in 0..bytes.len() {
            for j in i + 1..=bytes.len() {
                if (i, j) != (0, bytes.len()) {
                    let part = &PETER[i..j];
                    assert!(Verifier::parse(part).is_err(), "{part}");
                }
            }
            let mut changed = bytes.to_vec();
            changed[i] += 1;
            if let Ok(s) = std::str::from_utf8(&changed) {
                assert!(Verifier::parse(s).is_err(), "{s}");
            }
        }
        for i in 0..PETER_PRIVATE.len() {
            let mut changed = PETER_PRIVATE.as_bytes().to_vec();
            changed[i] += 1;
            if let Ok(s) = std::str::from_utf8(&changed) {
                assert!(Signer::parse(s).is_err(), "{s}");
            }
        }
        // x/mod note's: a wrong-length key and an unknown algorithm, each with a matching hash.
        assert_eq!(
            Verifier::parse("PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==").err(),
            Some(malformed_key("verifier", "an Ed25519 key is 32 bytes, not 36"))
        );
        assert_eq!(
            Verifier::parse("PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW").err(),
            Some(NoteError::UnknownAlgorithm(0x65))
        );
        assert_eq!(
            Verifier::parse("PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW").err(),
            Some(NoteError::KeyHashMismatch { kind: "verifier", given: 0xc74f_20a4, actual: 0xc74f_20a3 })
        );
        assert_eq!(
            Verifier::parse("Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW").err(),
            Some(NoteError::InvalidName("Peter Neumann".into()))
        );
        assert_eq!(
            Signer::parse(PETER).err(),
            Some(malformed_key("private", "expected PRIVATE+KEY+<name>+<hash>+<key data>"))
        );
        // A private key's error does not echo the key data.
        let error = Signer::parse("PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDF!");
        assert!(error.is_err_and(|e| !e.to_string().contains("AYEKF")));
    }

    #[test]
    fn generated_keys_round_trip() -> Result<(), NoteError> {
        let (private, public) = generate_key("sum.example.com")?;
        let signer = Signer::parse(&private)?;
        let verifier = Verifier::parse(&public)?;
        assert_eq!(signer.verifier(), verifier);
        assert!(public.starts_with(&format!("sum.example.com+{:08x}+", verifier.key_hash())));
        assert_eq!(Verifier::from_public_key("sum.example.com", verifier.public_key()), Ok(verifier.clone()));

        let note = signer.sign("go.sum database tree\n1\nAAAA\n")?;
        assert_eq!(verifier.open(&note), Ok("go.sum database tree\n1\nAAAA\n"));
        // A tampered text, a tampered signature, another key of the same name: all refused.
        let tampered = note.replacen("tree\n1", "tree\n2", 1);
        assert_eq!(
            verifier.open(&tampered),
            Err(NoteError::BadSignature(format!("sum.example.com+{:08x}", verifier.key_hash())))
        );
        let (line_start, sig_start) = (note.rfind('—').unwrap_or(0), note.rfind(' ').unwrap_or(0) + 1);
        assert!(line_start > 0 && sig_start > line_start);
        let sig = BASE64.decode(note[sig_start..].trim_end()).map_err(|_| NoteError::Malformed("test"))?;
        for i in [4, 40, 67] {
            let mut bad = sig.clone();
            bad[i] ^= 1;
            let forged = format!("{}{}\n", &note[..sig_start], BASE64.encode(&bad));
            assert!(matches!(verifier.open(&forged), Err(NoteError::BadSignature(_))), "byte {i}");
        }
        let other = Signer::generate("sum.example.com")?;
        assert!(matches!(other.verifier().open(&note), Err(NoteError::NotSigned(_))));
        Ok(())
    }

    #[test]
    fn malformed_notes_are_refused() -> Result<(), NoteError> {
        let peter = Verifier::parse(PETER)?;
        for bad in [
            TEXT.to_string(),
            format!("{TEXT}\n"),
            format!("{TEXT}\n{}", PETER_SIG.trim_end()),
            format!("\x01{TEXT}\n{PETER_SIG}"),
            format!("{TEXT}\n— Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"),
            format!("{TEXT}\n{PETER_SIG}Unexpected line.\n"),
            format!("{TEXT}\n{}", PETER_SIG.repeat(101)),
        ] {
            assert!(matches!(peter.open(&bad), Err(NoteError::Malformed(_))), "{bad:?}");
        }
        let forged = format!("{TEXT}\n{}ABCD{}", &PETER_SIG[..60], &PETER_SIG[60..]);
        assert_eq!(peter.open(&forged), Err(NoteError::BadSignature("PeterNeumann+c74f20a3".into())));

        let signer = Signer::parse(PETER_PRIVATE)?;
        assert_eq!(signer.sign("abc"), Err(NoteError::Malformed("the text must end in a newline")));
        assert!(signer.sign("a\tb\n").is_err());
        assert_eq!(Signer::from_seed("a+b", [0; 32]).err(), Some(NoteError::InvalidName("a+b".into())));
        Ok(())
    }
}
