//! [`Language`]: the languages programs are written in, a type instead of a string where a host
//! chooses one; the lowercase names (`"typescript"`, `"python"`) where one crosses a boundary.

use std::fmt;
use std::str::FromStr;

use crate::json;

/// A language programs are written in.
///
/// Where a host chooses a language ([`Context::code_runtime`](crate::Context::code_runtime),
/// [`describe`](crate::describe)) it may pass one of these or its name; a runtime reports its own
/// by name ([`CodeRuntime::language`](crate::CodeRuntime::language)), which compares equal to
/// the variant:
///
/// ```
/// use code_runtime::Language;
///
/// assert_eq!("python".parse::<Language>(), Ok(Language::Python));
/// assert_eq!(Language::TypeScript.as_str(), "typescript");
/// assert!("typescript" == Language::TypeScript);
/// assert!("cobol".parse::<Language>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Language {
    /// TypeScript (and JavaScript), run on V8.
    TypeScript,
    /// Python 3, run on CPython.
    Python,
}

impl Language {
    /// Every language, TypeScript first (as messages list them).
    pub const ALL: [Language; 2] = [Language::TypeScript, Language::Python];

    /// Its name, lowercase: `"typescript"` or `"python"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Language::TypeScript => "typescript",
            Language::Python => "python",
        }
    }
}

/// A name that is not a [`Language`]'s.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown language {} (typescript or python)", json::quote(.0))]
pub struct UnknownLanguage(pub String);

impl FromStr for Language {
    type Err = UnknownLanguage;

    fn from_str(name: &str) -> Result<Self, UnknownLanguage> {
        Language::ALL
            .into_iter()
            .find(|language| language.as_str() == name)
            .ok_or_else(|| UnknownLanguage(name.to_owned()))
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AsRef<str> for Language {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<str> for Language {
    fn eq(&self, name: &str) -> bool {
        self.as_str() == name
    }
}

impl PartialEq<&str> for Language {
    fn eq(&self, name: &&str) -> bool {
        self.as_str() == *name
    }
}

impl PartialEq<Language> for str {
    fn eq(&self, language: &Language) -> bool {
        self == language.as_str()
    }
}

impl PartialEq<Language> for &str {
    fn eq(&self, language: &Language) -> bool {
        *self == language.as_str()
    }
}

/// A language as a host names it: a [`Language`], or its name.
pub trait AsLanguage {
    /// The language.
    ///
    /// # Errors
    ///
    /// A name no language has.
    fn as_language(&self) -> Result<Language, UnknownLanguage>;
}

impl AsLanguage for Language {
    fn as_language(&self) -> Result<Language, UnknownLanguage> {
        Ok(*self)
    }
}

impl AsLanguage for str {
    fn as_language(&self) -> Result<Language, UnknownLanguage> {
        self.parse()
    }
}

impl AsLanguage for String {
    fn as_language(&self) -> Result<Language, UnknownLanguage> {
        self.parse()
    }
}

impl<T: AsLanguage + ?Sized> AsLanguage for &T {
    fn as_language(&self) -> Result<Language, UnknownLanguage> {
        (**self).as_language()
    }
}
