//! The social layer on the graph: a person's traits are relations `trait:<name>` to a
//! value, their ties to other people plain relations. Used by the `person_*` tools;
//! replies follow the reference's formats.

use crate::i18n::Msg;
use crate::memory::graph::{GraphError, GraphStore, Recall, RecallSort, Relation, Triple};

/// Traits are relations with this prefix.
const TRAIT_PREFIX: &str = "trait:";

/// Records `name`'s `trait` as `value`, replacing an earlier value.
pub fn set_trait(g: &mut GraphStore, name: &str, trait_: &str, value: &str) -> Result<usize, GraphError> {
    let relation = format!("{TRAIT_PREFIX}{trait_}");
    g.soft_delete_exact(name, &relation)?;
    let t = Triple {
        subject: name.into(),
        subject_type: "person".into(),
        relation,
        object: value.into(),
        object_type: "trait_value".into(),
        ..Default::default()
    };
    Ok(g.commit(&[t], "social_trait", 0)?.1)
}

/// Records `a —relation→ b` between two people.
pub fn relate(g: &mut GraphStore, a: &str, relation: &str, b: &str) -> Result<usize, GraphError> {
    let t = Triple {
        subject: a.into(),
        subject_type: "person".into(),
        relation: relation.into(),
        object: b.into(),
        object_type: "person".into(),
        ..Default::default()
    };
    Ok(g.commit(&[t], "social_relation", 0)?.1)
}

fn around(g: &GraphStore, name: &str, depth: usize) -> Result<Recall, GraphError> {
    g.recall(&[], &[name.to_owned()], depth, None, RecallSort::Relevance)
}

fn traits<'a>(rels: &'a [Relation], name: &str) -> Vec<(&'a str, &'a str)> {
    rels.iter()
        .filter(|r| r.source == name)
        .filter_map(|r| r.relation.strip_prefix(TRAIT_PREFIX).map(|t| (t, r.target.as_str())))
        .collect()
}

/// The `person_query` reply.
pub fn profile(g: &GraphStore, name: &str) -> Result<String, GraphError> {
    let r = around(g, name, 1)?;
    let mut lines = vec![Msg::ProfileTitle { name }.text()];
    let ts = traits(&r.relations, name);
    let ties: Vec<&Relation> = r
        .relations
        .iter()
        .filter(|r| !r.relation.starts_with(TRAIT_PREFIX))
        .collect();
    if !ts.is_empty() {
        lines.push(Msg::ProfileTraits.text());
        lines.extend(ts.iter().map(|(k, v)| format!("  {k}: {v}")));
    }
    if !ties.is_empty() {
        lines.push(Msg::ProfileTies.text());
        lines.extend(
            ties.iter()
                .map(|r| format!("  {} —({})—→ {}", r.source, r.relation, r.target)),
        );
    }
    if ts.is_empty() && ties.is_empty() {
        lines.push(Msg::ProfileEmpty.text());
    }
    Ok(lines.join("\n"))
}

/// The `person_network` reply: everyone within `depth` ties of `name`, with their
/// traits and their ties that do not lead back to `name`.
pub fn network(g: &GraphStore, name: &str, depth: usize) -> Result<String, GraphError> {
    let r = around(g, name, depth)?;
    let people: Vec<&str> = r
        .relations
        .iter()
        .filter(|r| !r.relation.starts_with(TRAIT_PREFIX))
        .flat_map(|r| [r.source.as_str(), r.target.as_str()])
        .filter(|p| *p != name)
        .fold(Vec::new(), |mut v, p| {
            if !v.contains(&p) {
                v.push(p);
            }
            v
        });
    if people.is_empty() {
        return Ok(Msg::NetworkNotFound { name }.text());
    }
    let mut lines = vec![Msg::NetworkTitle { name, depth }.text()];
    for p in people {
        lines.push(format!("  · {p}"));
        let own = around(g, p, 1)?;
        lines.extend(traits(&own.relations, p).iter().map(|(k, v)| format!("    {k}: {v}")));
        lines.extend(
            own.relations
                .iter()
                .filter(|r| r.source == p && !r.relation.starts_with(TRAIT_PREFIX) && r.target != name)
                .map(|r| format!("    —({})—→ {}", r.relation, r.target)),
        );
    }
    Ok(lines.join("\n"))
}

/// A person as plugins see it (`social.getPerson`): traits and ties.
pub fn person(g: &GraphStore, name: &str) -> Result<serde_json::Value, GraphError> {
    let r = around(g, name, 1)?;
    let traits: serde_json::Map<String, serde_json::Value> = traits(&r.relations, name)
        .into_iter()
        .map(|(k, v)| (k.to_owned(), serde_json::Value::String(v.to_owned())))
        .collect();
    let ties: Vec<serde_json::Value> = r
        .relations
        .iter()
        .filter(|r| !r.relation.starts_with(TRAIT_PREFIX))
        .map(|r| serde_json::json!({"source": r.source, "relation": r.relation, "target": r.target}))
        .collect();
    let found = !traits.is_empty() || !ties.is_empty() || r.entities.iter().any(|e| e.name == name);
    Ok(serde_json::json!({"name": name, "found": found, "traits": traits, "relations": ties}))
}

/// One trait (`social.getTrait`): `{value, found}`.
pub fn get_trait(g: &GraphStore, name: &str, trait_: &str) -> Result<serde_json::Value, GraphError> {
    let r = around(g, name, 1)?;
    let value = traits(&r.relations, name)
        .into_iter()
        .find(|(k, _)| *k == trait_)
        .map(|(_, v)| v.to_owned());
    Ok(serde_json::json!({"found": value.is_some(), "value": value.unwrap_or_default()}))
}

/// The people within `depth` ties of `name` (`social.getNetwork`), each as [`person`].
pub fn network_json(g: &GraphStore, name: &str, depth: usize) -> Result<serde_json::Value, GraphError> {
    let r = around(g, name, depth.max(1))?;
    let mut people: Vec<&str> = Vec::new();
    for rel in r.relations.iter().filter(|r| !r.relation.starts_with(TRAIT_PREFIX)) {
        for p in [rel.source.as_str(), rel.target.as_str()] {
            if p != name && !people.contains(&p) {
                people.push(p);
            }
        }
    }
    let people = people
        .into_iter()
        .map(|p| person(g, p))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(serde_json::json!({"name": name, "people": people}))
}

/// Every entity recorded as a person (`social.listPersons`), by name.
pub fn persons(g: &GraphStore) -> Result<Vec<String>, GraphError> {
    let all = g.recall(&[], &[], 0, None, RecallSort::Relevance)?;
    let mut names: Vec<String> = all
        .entities
        .into_iter()
        .filter(|e| e.kind == "person")
        .map(|e| e.name)
        .collect();
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traits_replace_and_ties_show_in_profile_and_network() {
        let mut g = GraphStore::open_in_memory().unwrap();
        set_trait(&mut g, "小明", "性格", "内向").unwrap();
        set_trait(&mut g, "小明", "性格", "开朗").unwrap();
        relate(&mut g, "小明", "朋友", "小红").unwrap();
        relate(&mut g, "小红", "同事", "小刚").unwrap();
        set_trait(&mut g, "小红", "爱好", "跑步").unwrap();
        assert_eq!(
            profile(&g, "小明").unwrap(),
            "▎Profile of 小明\n[Traits]\n  性格: 开朗\n[Relationships]\n  小明 —(朋友)—→ 小红"
        );
        assert_eq!(
            profile(&g, "无名氏").unwrap(),
            "▎Profile of 无名氏\n  (nothing recorded yet)"
        );
        let p = person(&g, "小明").unwrap();
        assert_eq!(p["traits"], serde_json::json!({"性格": "开朗"}));
        assert_eq!(p["relations"][0]["target"], "小红");
        assert_eq!(
            get_trait(&g, "小明", "性格").unwrap(),
            serde_json::json!({"found": true, "value": "开朗"})
        );
        assert_eq!(get_trait(&g, "小明", "身高").unwrap()["found"], false);
        assert_eq!(persons(&g).unwrap(), ["小刚", "小明", "小红"]);
        let nj = network_json(&g, "小明", 2).unwrap();
        assert_eq!(nj["people"][0]["name"], "小红");
        let net = network(&g, "小明", 2).unwrap();
        assert_eq!(
            net,
            "▎Social network of 小明 (2 degrees)\n  · 小红\n    爱好: 跑步\n    —(同事)—→ 小刚\n  · 小刚"
        );
        assert_eq!(network(&g, "无名氏", 2).unwrap(), "No social network found for 无名氏");
    }
}
