//! The social layer on the graph: a person's traits are relations `trait:<name>` to a
//! value, their ties to other people plain relations. Used by the `person_*` tools;
//! replies follow the reference's formats.

use super::graph::{GraphError, GraphStore, Recall, RecallSort, Relation, Triple};

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
    let mut lines = vec![format!("▎{name} 的档案")];
    let ts = traits(&r.relations, name);
    let ties: Vec<&Relation> = r
        .relations
        .iter()
        .filter(|r| !r.relation.starts_with(TRAIT_PREFIX))
        .collect();
    if !ts.is_empty() {
        lines.push("【特质】".into());
        lines.extend(ts.iter().map(|(k, v)| format!("  {k}: {v}")));
    }
    if !ties.is_empty() {
        lines.push("【社交关系】".into());
        lines.extend(
            ties.iter()
                .map(|r| format!("  {} —({})—→ {}", r.source, r.relation, r.target)),
        );
    }
    if ts.is_empty() && ties.is_empty() {
        lines.push("  （尚无记录）".into());
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
        return Ok(format!("未找到 {name} 的社交网络"));
    }
    let mut lines = vec![format!("▎{name} 的社交网络（{depth} 度）")];
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
            "▎小明 的档案\n【特质】\n  性格: 开朗\n【社交关系】\n  小明 —(朋友)—→ 小红"
        );
        assert_eq!(profile(&g, "无名氏").unwrap(), "▎无名氏 的档案\n  （尚无记录）");
        let net = network(&g, "小明", 2).unwrap();
        assert_eq!(
            net,
            "▎小明 的社交网络（2 度）\n  · 小红\n    爱好: 跑步\n    —(同事)—→ 小刚\n  · 小刚"
        );
        assert_eq!(network(&g, "无名氏", 2).unwrap(), "未找到 无名氏 的社交网络");
    }
}
