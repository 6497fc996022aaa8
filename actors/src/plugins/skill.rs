//! SKILL.md plugins (the Agent Skills format): instructions the model reads on demand.
//!
//! A skill is a directory with a `SKILL.md` whose YAML front matter names and
//! describes it. Only the index (name + description) goes into every system prompt;
//! the model calls `skill_info` to read a skill's body when it needs it (progressive
//! disclosure), so a hundred skills cost a hundred lines, not a hundred documents.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The front matter of a SKILL.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Frontmatter {
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub license: Option<String>,
    #[serde(default)]
    pub compatibility: Option<String>,
    /// Free-form; ClawHub nests its own keys under `metadata.openclaw`.
    #[serde(default)]
    pub metadata: Option<Value>,
    /// A space-separated string or a list.
    #[serde(default)]
    pub allowed_tools: Option<Value>,
}

/// A loaded skill.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    pub metadata: Option<Value>,
    pub allowed_tools: Vec<String>,
    /// The instructions after the front matter.
    #[serde(skip)]
    pub body: String,
}

/// Why a SKILL.md was refused.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error("cannot read {0}: {1}")]
    Io(String, std::io::Error),
    #[error("{0}: SKILL.md must start with a `---` line, then YAML front matter, then `---`")]
    NoFrontmatter(String),
    #[error("{0}: invalid front matter: {1}; `name` and `description` are required")]
    Yaml(String, serde_yaml_ng::Error),
    #[error("{0}: skill name `{1}` is invalid: use 1-64 characters of [a-z0-9-], not starting or ending with `-`")]
    Name(String, String),
    #[error("{0}: `description` is empty or over 1024 characters")]
    Description(String),
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && !n.starts_with('-')
        && !n.ends_with('-')
        && n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

impl Skill {
    /// Parses the text of a SKILL.md (`origin` names it in errors).
    pub fn parse(origin: &str, text: &str) -> Result<Self, SkillError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let rest = text
            .strip_prefix("---\n")
            .or_else(|| text.strip_prefix("---\r\n"))
            .ok_or_else(|| SkillError::NoFrontmatter(origin.to_owned()))?;
        let end = rest
            .find("\n---")
            .ok_or_else(|| SkillError::NoFrontmatter(origin.to_owned()))?;
        let yaml = &rest[..end];
        let body = rest[end + 4..]
            .trim_start_matches(['-', '\r'])
            .trim_start_matches('\n')
            .to_owned();
        let fm: Frontmatter = serde_yaml_ng::from_str(yaml).map_err(|e| SkillError::Yaml(origin.to_owned(), e))?;
        if !valid_name(&fm.name) {
            return Err(SkillError::Name(origin.to_owned(), fm.name));
        }
        if fm.description.trim().is_empty() || fm.description.chars().count() > 1024 {
            return Err(SkillError::Description(origin.to_owned()));
        }
        let allowed_tools = match fm.allowed_tools {
            Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
            Some(Value::Array(a)) => a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
            _ => Vec::new(),
        };
        Ok(Self {
            name: fm.name,
            description: fm.description.trim().to_owned(),
            license: fm.license,
            compatibility: fm.compatibility,
            metadata: fm.metadata,
            allowed_tools,
            body,
        })
    }

    /// Loads `dir/SKILL.md`.
    pub fn load(dir: &Path) -> Result<Self, SkillError> {
        let path = dir.join("SKILL.md");
        let text = std::fs::read_to_string(&path).map_err(|e| SkillError::Io(path.display().to_string(), e))?;
        Self::parse(&path.display().to_string(), &text)
    }
}

/// The index placed in the system prompt.
pub fn index(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "# Skills\nInstructions for these tasks are available; call skill_info with the skill's name to read them before doing such a task:\n",
    );
    for s in skills {
        out.push_str(&format!("- {}: {}\n", s.name, s.description));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PDF: &str = "---\nname: pdf-tools\ndescription: Fill and merge PDF forms.\nlicense: MIT\nallowed-tools: Bash Read\nmetadata:\n  openclaw:\n    emoji: \"📄\"\n    requires:\n      bins: [qpdf]\n---\n# PDF tools\n\nUse qpdf to merge.\n";

    #[test]
    fn agent_skills_front_matter_with_nested_metadata() {
        let s = Skill::parse("t", PDF).unwrap();
        assert_eq!(s.name, "pdf-tools");
        assert_eq!(s.allowed_tools, ["Bash", "Read"]);
        assert_eq!(s.metadata.as_ref().unwrap()["openclaw"]["requires"]["bins"][0], "qpdf");
        assert!(s.body.starts_with("# PDF tools"));
        assert!(index(&[s]).contains("- pdf-tools: Fill and merge PDF forms."));
    }

    #[test]
    fn bad_skills_are_refused_with_reasons() {
        assert!(matches!(
            Skill::parse("t", "# no front matter"),
            Err(SkillError::NoFrontmatter(_))
        ));
        assert!(matches!(
            Skill::parse("t", "---\nname: x\n---\n"),
            Err(SkillError::Yaml(..))
        ));
        assert!(matches!(
            Skill::parse("t", "---\nname: Bad_Name\ndescription: d\n---\n"),
            Err(SkillError::Name(..))
        ));
        let list = Skill::parse("t", "---\nname: a\ndescription: d\nallowed-tools: [x, y]\n---\nbody").unwrap();
        assert_eq!(list.allowed_tools, ["x", "y"]);
    }
}
