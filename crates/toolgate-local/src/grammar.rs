//! The grammar that constrains a tool call.
//!
//! The offered tools' JSON Schemas are combined into one schema,
//! `{"anyOf": [{"type": "object", "properties": {"name": {"const": TOOL}, "arguments": SCHEMA},
//! "required": ["name", "arguments"], "additionalProperties": false}, ...]}`, which llama.cpp's
//! JSON-Schema converter turns into GBNF. The grammar's root rule wraps it in the tags:
//! `<tool_call>` call `</tool_call>`.
//!
//! - `required` and a named tool: the grammar applies from the first token, so the output is one call
//!   (of the named tool only, for a named choice).
//! - `auto`: the grammar is *lazy*: the model writes free text, and the grammar takes over once it
//!   writes `<tool_call>`.
//! - `none`: no tools and no grammar.
//!
//! `$defs`/`definitions` of each tool are moved to the top of the combined schema (renamed per tool) so
//! `$ref`s keep resolving. Schema keywords the converter cannot express as a grammar (numeric bounds,
//! for instance) are still checked by the engine, which turns an invalid input into a tool error.

use serde_json::{Map, Value, json};
use toolgate_protocol::ToolChoice;

use crate::format::{FunctionTool, TOOL_CALL_CLOSE, TOOL_CALL_OPEN};

/// The name of the root rule.
pub const ROOT_RULE: &str = "toolgate-call";

/// A grammar for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolGrammar {
    /// GBNF text; its root rule is [`ROOT_RULE`].
    pub gbnf: String,
    /// True when it only applies once the output contains `<tool_call>` (tool choice `auto`).
    pub lazy: bool,
}

/// Why no grammar could be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrammarError {
    /// llama.cpp rejected the combined schema.
    #[error("cannot turn the tools' JSON Schemas into a grammar: {0}")]
    Schema(String),
}

/// The combined schema of one tool call (see the module docs).
pub fn call_schema(tools: &[FunctionTool]) -> Value {
    let mut defs = Map::new();
    let variants: Vec<Value> = tools
        .iter()
        .enumerate()
        .map(|(index, tool)| {
            let prefix = format!("t{index}-");
            let mut schema = tool.schema.clone();
            if let Value::Object(map) = &mut schema {
                map.remove("$schema");
                for key in ["$defs", "definitions"] {
                    if let Some(Value::Object(local)) = map.remove(key) {
                        for (name, mut def) in local {
                            rewrite_refs(&mut def, &prefix);
                            defs.insert(format!("{prefix}{name}"), def);
                        }
                    }
                }
            }
            rewrite_refs(&mut schema, &prefix);
            json!({
                "type": "object",
                "properties": {"name": {"const": tool.name}, "arguments": arguments_schema(schema)},
                "required": ["name", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    let mut root = Map::new();
    root.insert("anyOf".into(), Value::Array(variants));
    if !defs.is_empty() {
        root.insert("$defs".into(), Value::Object(defs));
    }
    Value::Object(root)
}

/// A tool schema as the `arguments` of a call: always an object. A schema that says nothing about the
/// type (`{}` or `true`) becomes "any object"; objects are closed unless they say otherwise.
fn arguments_schema(schema: Value) -> Value {
    match schema {
        Value::Bool(_) => json!({"type": "object"}),
        Value::Object(mut map) => {
            if !map.contains_key("type")
                && !map.contains_key("anyOf")
                && !map.contains_key("oneOf")
                && !map.contains_key("$ref")
            {
                map.insert("type".into(), json!("object"));
            }
            if map.get("type") == Some(&json!("object"))
                && !map.contains_key("additionalProperties")
                && map.contains_key("properties")
            {
                map.insert("additionalProperties".into(), json!(false));
            }
            Value::Object(map)
        }
        _ => json!({"type": "object"}),
    }
}

/// Prefixes local `$ref`s (`#/$defs/X`, `#/definitions/X`) with the tool's prefix, pointing them at the
/// hoisted definitions.
fn rewrite_refs(value: &mut Value, prefix: &str) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if key == "$ref"
                    && let Value::String(reference) = child
                {
                    for local in ["#/$defs/", "#/definitions/"] {
                        if let Some(name) = reference.strip_prefix(local) {
                            *reference = format!("#/$defs/{prefix}{name}");
                            break;
                        }
                    }
                } else {
                    rewrite_refs(child, prefix);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| rewrite_refs(item, prefix)),
        _ => {}
    }
}

/// The GBNF grammar of a call to one of `tools` (see the module docs).
pub fn call_grammar(tools: &[FunctionTool]) -> Result<String, GrammarError> {
    let schema = call_schema(tools).to_string();
    let body = llama_cpp_2::json_schema_to_grammar(&schema).map_err(|error| GrammarError::Schema(error.to_string()))?;
    let body = single_line(&body);
    Ok(format!("{body}\n{ROOT_RULE} ::= {} root {}\n", gbnf_literal(TOOL_CALL_OPEN), gbnf_literal(TOOL_CALL_CLOSE)))
}

/// Replaces the converter's whitespace rule (which allows line breaks and indentation between tokens) with
/// at most one space: the call stays on one line, as the prompt asks, and small models copy the user's
/// words into compact JSON far more reliably than into indented JSON.
fn single_line(gbnf: &str) -> String {
    gbnf.lines()
        .map(|line| if line.starts_with("space ::=") { "space ::= \" \"?" } else { line })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The grammar a request needs, if any.
pub fn grammar_for(tools: &[FunctionTool], choice: &ToolChoice) -> Result<Option<ToolGrammar>, GrammarError> {
    if tools.is_empty() || *choice == ToolChoice::None {
        return Ok(None);
    }
    Ok(Some(ToolGrammar { gbnf: call_grammar(tools)?, lazy: *choice == ToolChoice::Auto }))
}

/// A GBNF string literal.
fn gbnf_literal(text: &str) -> String {
    let mut out = String::from("\"");
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            other => out.push(other),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn tool(name: &str, schema: Value) -> FunctionTool {
        FunctionTool { name: name.into(), description: None, schema }
    }

    #[test]
    fn the_call_schema_pins_each_name_and_hoists_definitions() {
        let schema = call_schema(&[
            tool(
                "delete_file",
                json!({"$schema": "x", "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            ),
            tool(
                "pay",
                json!({"type": "object", "properties": {"to": {"$ref": "#/$defs/Person"}}, "$defs": {"Person": {"type": "string"}}}),
            ),
        ]);
        assert_eq!(schema["anyOf"][0]["properties"]["name"], json!({"const": "delete_file"}));
        assert_eq!(schema["anyOf"][0]["properties"]["arguments"]["additionalProperties"], json!(false));
        assert_eq!(schema["anyOf"][0]["properties"]["arguments"].get("$schema"), None);
        assert_eq!(
            schema["anyOf"][1]["properties"]["arguments"]["properties"]["to"]["$ref"],
            json!("#/$defs/t1-Person")
        );
        assert_eq!(schema["$defs"]["t1-Person"], json!({"type": "string"}));
    }

    #[test]
    fn grammars_follow_the_tool_choice() {
        let tools = [tool(
            "delete_file",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        )];
        assert_eq!(grammar_for(&tools, &ToolChoice::None).unwrap(), None);
        assert_eq!(grammar_for(&[], &ToolChoice::Auto).unwrap(), None);
        let auto = grammar_for(&tools, &ToolChoice::Auto).unwrap().unwrap();
        assert!(auto.lazy);
        let required = grammar_for(&tools, &ToolChoice::Required).unwrap().unwrap();
        assert!(!required.lazy);
        assert!(required.gbnf.contains(r#"toolgate-call ::= "<tool_call>" root "</tool_call>""#), "{}", required.gbnf);
        assert!(required.gbnf.contains("delete_file"), "{}", required.gbnf);
        assert!(required.gbnf.contains("path"), "{}", required.gbnf);
        let space: Vec<&str> = required.gbnf.lines().filter(|line| line.starts_with("space ::=")).collect();
        assert_eq!(space, [r#"space ::= " "?"#], "calls stay on one line");
    }

    #[test]
    fn a_broken_schema_is_a_typed_error() {
        let tools = [tool("x", json!({"type": "object", "properties": {"a": {"$ref": "#/nowhere/at/all"}}}))];
        assert!(matches!(call_grammar(&tools), Err(GrammarError::Schema(_))));
    }
}
