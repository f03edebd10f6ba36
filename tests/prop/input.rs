//! Input fuzzing of `gatewright render` and `gatewright check`: the shipped examples with
//! random damage (truncation, lost and doubled lines, stray YAML indicators, tabs, BOMs,
//! NULs, bytes that are not UTF-8), objects whose fields have the wrong shape, and raw
//! YAML bombs. Each run ends with exit 0, 2 (input unreadable) or 3 (a template failed),
//! never a panic; a failure says `error: ...` on stderr; input that is not YAML exits 2.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::Command;

use gatewright::cli::{self, EXIT_INPUT, EXIT_OK, EXIT_TEMPLATE};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

use crate::strings::SPECIAL;

fn example_files() -> Vec<(String, Vec<u8>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut out = Vec::new();
    for class in crate::world::CLASSES {
        for f in [
            "gateway.yaml",
            "routes.yaml",
            "class/blueprint.yaml",
            "class/gatewayclass.yaml",
        ] {
            let p = root.join(class).join(f);
            out.push((format!("{class}/{f}"), std::fs::read(&p).unwrap()));
        }
    }
    out
}

/// One piece of damage.
#[derive(Clone, Debug)]
enum Damage {
    Truncate(usize),
    DropLine(usize),
    DoubleLine(usize),
    Insert(usize, String),
    Replace(usize, String),
    Indent(usize, usize),
    /// A field set to a value of the wrong shape: (line, new value).
    Retype(usize, &'static str),
    NotUtf8(usize),
}

fn damage() -> impl Strategy<Value = Damage> {
    let at = any::<usize>();
    let junk = prop_oneof![
        prop::sample::select(SPECIAL).prop_map(str::to_owned),
        prop::sample::select(vec![
            ":",
            "- ",
            "[",
            "{",
            "]",
            "}",
            "&a ",
            "*a",
            "!!binary ",
            "!!int ",
            "\t",
            "\u{feff}",
            "\0",
            "? ",
            "<<: *a",
            "'",
            "\"",
            "#",
            "|",
            ">",
            "%TAG ! tag:x:",
            "---",
            "..."
        ])
        .prop_map(str::to_owned),
    ];
    let wrong = prop::sample::select(vec![
        "\"string\"",
        "[]",
        "{}",
        "[1, 2]",
        "{a: b}",
        "null",
        "~",
        "-1",
        "99999999999999999999",
        "1e400",
        "0x10",
        "true",
        "\"\"",
        ".nan",
        "[[[[[[]]]]]]",
        "*undefined_alias",
    ]);
    prop_oneof![
        1 => at.prop_map(Damage::Truncate),
        1 => at.prop_map(Damage::DropLine),
        1 => at.prop_map(Damage::DoubleLine),
        2 => (at, junk.clone()).prop_map(|(i, s)| Damage::Insert(i, s)),
        1 => (at, junk).prop_map(|(i, s)| Damage::Replace(i, s)),
        1 => (at, 1usize..5).prop_map(|(i, n)| Damage::Indent(i, n)),
        4 => (at, wrong).prop_map(|(i, s)| Damage::Retype(i, s)),
        1 => at.prop_map(Damage::NotUtf8),
    ]
}

fn apply(text: &[u8], d: &Damage) -> Vec<u8> {
    let lines: Vec<&[u8]> = text.split_inclusive(|b| *b == b'\n').collect();
    let n = lines.len().max(1);
    let join = |ls: Vec<Vec<u8>>| ls.concat();
    let owned: Vec<Vec<u8>> = lines.iter().map(|l| l.to_vec()).collect();
    match d {
        Damage::Truncate(i) => text[..i % (text.len() + 1)].to_vec(),
        Damage::DropLine(i) => {
            let mut ls = owned;
            if !ls.is_empty() {
                ls.remove(i % n);
            }
            join(ls)
        }
        Damage::DoubleLine(i) => {
            let mut ls = owned;
            if !ls.is_empty() {
                let l = ls[i % n].clone();
                ls.insert(i % n, l);
            }
            join(ls)
        }
        Damage::Insert(i, s) => {
            let at = i % (text.len() + 1);
            [&text[..at], s.as_bytes(), &text[at..]].concat()
        }
        Damage::Replace(i, s) => {
            if text.is_empty() {
                return s.as_bytes().to_vec();
            }
            let at = i % text.len();
            [&text[..at], s.as_bytes(), &text[at + 1..]].concat()
        }
        Damage::Indent(i, k) => {
            let mut ls = owned;
            if !ls.is_empty() {
                let l = &mut ls[i % n];
                l.splice(0..0, std::iter::repeat_n(b' ', *k));
            }
            join(ls)
        }
        Damage::Retype(i, v) => {
            // The value of the i-th `key: value` line becomes `v`.
            let mut ls = owned;
            let with_value: Vec<usize> = ls
                .iter()
                .enumerate()
                .filter(|(_, l)| l.windows(2).any(|w| w == b": "))
                .map(|(j, _)| j)
                .collect();
            if let Some(&j) = with_value.get(i % with_value.len().max(1)) {
                let l = &ls[j];
                let colon = l.windows(2).position(|w| w == b": ").unwrap_or(0);
                let mut new = l[..colon + 2].to_vec();
                new.extend_from_slice(v.as_bytes());
                new.push(b'\n');
                ls[j] = new;
            }
            join(ls)
        }
        Damage::NotUtf8(i) => {
            let at = i % (text.len() + 1);
            [&text[..at], &[0xff, 0xfe, 0xc3][..], &text[at..]].concat()
        }
    }
}

fn now() -> Time {
    Time("2026-01-01T00:00:00Z".parse().unwrap())
}

/// Copies the example of `class` into `dir` (all four files), one of them replaced.
fn lay_out(dir: &Path, files: &[(String, Vec<u8>)], class: &str, damaged: &str, bytes: &[u8]) {
    for (name, content) in files
        .iter()
        .filter(|(n, _)| n.starts_with(&format!("{class}/")))
    {
        let path = dir.join(name.replace('/', "_"));
        let content = if name == damaged { bytes } else { content };
        std::fs::write(path, content).unwrap();
    }
}

/// Runs `render` and `check` on `dir`; the outcome must be clear. `not_yaml`: the damaged
/// file does not parse as YAML, so both must exit 2.
fn run_cli(dir: &Path, not_yaml: bool) -> Result<(), TestCaseError> {
    let paths = [dir.to_owned()];
    for (what, out) in [
        (
            "render",
            catch_unwind(AssertUnwindSafe(|| {
                cli::render(&paths, "gatewright-system", &now())
            })),
        ),
        (
            "check",
            catch_unwind(AssertUnwindSafe(|| cli::check(&paths))),
        ),
    ] {
        let out = out.map_err(|_| TestCaseError::fail(format!("{what} panicked")))?;
        prop_assert!(
            [EXIT_OK, EXIT_INPUT, EXIT_TEMPLATE].contains(&out.code),
            "{} exited {}",
            what,
            out.code
        );
        if out.code != EXIT_OK {
            prop_assert!(
                out.stderr
                    .iter()
                    .any(|l| l.starts_with("error: ") && l.len() > 10),
                "{} exited {} without an error line: {:?}",
                what,
                out.code,
                out.stderr
            );
        }
        if not_yaml {
            prop_assert_eq!(
                out.code,
                EXIT_INPUT,
                "{} of input that is not YAML: {:?}",
                what,
                out.stderr
            );
        }
        if what == "render" && out.code == EXIT_OK {
            prop_assert!(
                gatewright::render::output::parse_documents(&out.stdout).is_ok(),
                "render exited 0 with output that does not parse"
            );
        }
    }
    Ok(())
}

fn is_yaml(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok_and(|t| gatewright::render::output::parse_documents(t).is_ok())
}

#[test]
fn damaged_input_gives_a_clear_error_never_a_panic() {
    let files = example_files();
    let mut runner = TestRunner::new(crate::config(96, "proptest-regressions/prop-input.txt"));
    let result = runner.run(
        &(0..files.len(), prop::collection::vec(damage(), 1..4)),
        |(f, damages)| {
            let (name, original) = &files[f];
            let class = name.split('/').next().unwrap_or_default();
            let bytes = damages.iter().fold(original.clone(), |t, d| apply(&t, d));
            let dir = tempfile::tempdir().unwrap();
            lay_out(dir.path(), &files, class, name, &bytes);
            run_cli(dir.path(), !is_yaml(&bytes))
        },
    );
    crate::finish("damaged input to render and check", &runner, result);
}

/// Inputs that attack the parser itself: alias bombs, deep nesting, huge scalars, many
/// documents, a file of random bytes.
fn bombs() -> Vec<(&'static str, Vec<u8>)> {
    let mut laughs = String::from(
        "a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for i in 1..12 {
        let p = i - 1;
        laughs.push_str(&format!(
            "a{i}: &a{i} [*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p}]\n"
        ));
    }
    let kind = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: y}\ndata:\n  ";
    vec![
        ("billion laughs", laughs.into_bytes()),
        ("deep flow nesting", format!("{kind}x: {}{}\n", "[".repeat(100_000), "]".repeat(100_000)).into_bytes()),
        ("deep block nesting", {
            let mut s = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n");
            for i in 0..5_000 {
                s.push_str(&" ".repeat(i + 1));
                s.push_str("a:\n");
            }
            s.into_bytes()
        }),
        ("deep sequence nesting", format!("{kind}x:\n{}\n", (0..5_000).map(|i| format!("{}- ", "  ".repeat(i))).collect::<Vec<_>>().join("\n")).into_bytes()),
        ("a huge scalar", format!("{kind}x: \"{}\"\n", "y".repeat(8 * 1024 * 1024)).into_bytes()),
        ("a long key", format!("{kind}{}: 1\n", "k".repeat(1_000_000)).into_bytes()),
        ("many documents", "---\n".repeat(200_000).into_bytes()),
        ("many Gateways", (0..3_000).map(|i| format!("---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: g{i}, namespace: n}}\nspec: {{gatewayClassName: c, listeners: []}}\n")).collect::<String>().into_bytes()),
        ("random bytes", (0..65_536u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()),
        ("a NUL", b"apiVersion: v1\0\nkind: ConfigMap\n".to_vec()),
        ("a BOM in the middle", "apiVersion: v1\nkind: \u{feff}ConfigMap\nmetadata: {name: a}\n".as_bytes().to_vec()),
        ("tabs for indentation", b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: a\n".to_vec()),
        ("duplicate keys", b"apiVersion: v1\nkind: ConfigMap\nkind: Secret\nmetadata: {name: a}\n".to_vec()),
        ("a merge key", b"base: &b {kind: ConfigMap}\n---\napiVersion: v1\n<<: *b\nmetadata: {name: a}\n".to_vec()),
        ("a list at the top", b"- apiVersion: v1\n  kind: ConfigMap\n".to_vec()),
        ("a scalar at the top", b"just text\n".to_vec()),
        ("a Gateway with a numeric name", b"apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: 7, namespace: n}\nspec: {gatewayClassName: c}\n".to_vec()),
        ("a blueprint with templates as a map", b"apiVersion: gatewright.dev/v1alpha1\nkind: GatewayClassBlueprint\nmetadata: {name: b}\nspec: {gatewayTemplates: {a: b}}\n".to_vec()),
        ("a blueprint whose template does not compile", b"apiVersion: gatewright.dev/v1alpha1\nkind: GatewayClassBlueprint\nmetadata: {name: b}\nspec: {gatewayTemplates: [{name: t, template: '{% for %}'}]}\n".to_vec()),
    ]
}

#[test]
fn parser_bombs_give_a_clear_error_never_a_panic() {
    for (what, bytes) in bombs() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("input.yaml"), &bytes).unwrap();
        let started = std::time::Instant::now();
        run_cli(dir.path(), !is_yaml(&bytes)).unwrap_or_else(|e| panic!("{what}: {e}"));
        println!("{what}: handled in {:?}", started.elapsed());
    }
}

/// The binary itself, on a few damaged inputs: the process exits 2 or 3 with an error
/// line, and never reports a panic.
#[test]
fn the_binary_exits_2_or_3_on_bad_input() {
    let files = example_files();
    let mut runner = TestRunner::new(crate::config(12, "proptest-regressions/prop-binary.txt"));
    let result = runner.run(
        &(0..files.len(), prop::collection::vec(damage(), 1..4)),
        |(f, damages)| {
            let (name, original) = &files[f];
            let class = name.split('/').next().unwrap_or_default();
            let bytes = damages.iter().fold(original.clone(), |t, d| apply(&t, d));
            let dir = tempfile::tempdir().unwrap();
            lay_out(dir.path(), &files, class, name, &bytes);
            for args in [
                &["render", "--now", "2026-01-01T00:00:00Z", "-f"][..],
                &["check", "-f"][..],
            ] {
                let out = Command::new(env!("CARGO_BIN_EXE_gatewright"))
                    .args(args)
                    .arg(dir.path())
                    .output()
                    .unwrap();
                let stderr = String::from_utf8_lossy(&out.stderr);
                let code = out.status.code();
                prop_assert!(
                    matches!(code, Some(0 | 2 | 3)),
                    "{:?} exited {:?}: {}",
                    args,
                    code,
                    stderr
                );
                prop_assert!(
                    !stderr.contains("panicked"),
                    "{:?} panicked: {}",
                    args,
                    stderr
                );
                if code != Some(0) {
                    prop_assert!(
                        stderr.lines().any(|l| l.starts_with("error: ")),
                        "{:?}: {}",
                        args,
                        stderr
                    );
                }
            }
            Ok(())
        },
    );
    crate::finish("damaged input to the binary", &runner, result);
}
