// Command celeval evaluates Flux Kustomization healthCheckExprs on captured objects the
// way kustomize-controller does, and turns captured objects into what the Argo CD Lua
// harness loads. It is a test tool of tests/health/run.
//
//	celeval flux EXPRS CASE...    one line per case: "CASE<TAB>RESULT<TAB>DETAIL"
//	celeval lua CASE              the case's object as a Lua 5.1 chunk: return { ... }
//	celeval get CASE FIELD        a top-level field of the case file (a list: one item a line)
//	celeval exprs FILE            the healthCheckExprs of FILE (a list, or a Kustomization's
//	                              spec.healthCheckExprs) as canonical JSON, to compare copies
//	celeval drift CASE RENDERED   whether the case's status is the one `gatewright render`
//	                              printed (lastTransitionTime ignored); exit 1 when not
//
// Flux semantics (fluxcd/pkg runtime/cel, RFC 0009): the expressions are parsed, not
// type-checked, in an environment with optional types and the strings, sets and encoders
// extensions; the object's top-level fields (apiVersion, kind, metadata, spec, status) are
// the variables. An object whose status.observedGeneration differs from
// metadata.generation is InProgress before any expression runs. Then inProgress, failed
// and current are tried in that order; the first true one decides, and none true is
// InProgress. An expression that cannot be evaluated (a field missing, a result that is not
// a bool) is an error, which kstatus reports as Unknown: printed here as "unknown".
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "flux":
		if len(os.Args) < 4 {
			usage()
		}
		err = fluxCmd(os.Args[2], os.Args[3:])
	case "lua":
		if len(os.Args) != 3 {
			usage()
		}
		err = luaCmd(os.Args[2])
	case "get":
		if len(os.Args) != 4 {
			usage()
		}
		err = getCmd(os.Args[2], os.Args[3])
	case "exprs":
		if len(os.Args) != 3 {
			usage()
		}
		err = exprsCmd(os.Args[2])
	case "drift":
		if len(os.Args) != 4 {
			usage()
		}
		err = driftCmd(os.Args[2], os.Args[3])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "celeval:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: celeval flux EXPRS CASE... | lua CASE | get CASE FIELD | exprs FILE | drift CASE RENDERED")
	os.Exit(2)
}

// readYAML reads one YAML document as JSON values, integers as int64 and other numbers as
// float64, as Kubernetes' unstructured objects hold them.
func readYAML(path string) (any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return decodeYAML(raw, path)
}

func decodeYAML(raw []byte, what string) (any, error) {
	j, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return numbers(v), nil
}

func numbers(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = numbers(x)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = numbers(x)
		}
		return t
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	default:
		return v
	}
}

// readCase reads a case file: a map with `object` and the expectations.
func readCase(path string) (map[string]any, error) {
	v, err := readYAML(path)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: not a map", path)
	}
	if _, ok := m["object"].(map[string]any); !ok {
		return nil, fmt.Errorf("%s: no object", path)
	}
	return m, nil
}

// exprEntry is one healthCheckExprs item.
type exprEntry struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Current    string `json:"current"`
	InProgress string `json:"inProgress,omitempty"`
	Failed     string `json:"failed,omitempty"`
}

// readExprs reads a list of healthCheckExprs, or a Kustomization holding them (in a stream
// of YAML documents, the first Kustomization's).
func readExprs(path string) ([]exprEntry, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for i, doc := range strings.Split("\n"+string(raw), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("%s document %d: %w", path, i, err)
		}
		var list []exprEntry
		if err := json.Unmarshal(j, &list); err == nil {
			return list, nil
		}
		var k struct {
			Kind string `json:"kind"`
			Spec struct {
				HealthCheckExprs []exprEntry `json:"healthCheckExprs"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(j, &k); err == nil && k.Kind == "Kustomization" {
			return k.Spec.HealthCheckExprs, nil
		}
	}
	return nil, fmt.Errorf("%s: neither a list of healthCheckExprs nor a Kustomization", path)
}

func exprsCmd(path string) error {
	list, err := readExprs(path)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return fmt.Errorf("%s: no healthCheckExprs", path)
	}
	out, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

// program parses an expression as kustomize-controller does: no declarations, no type
// check, so the object's top-level fields resolve at evaluation.
func program(env *cel.Env, expr string) (cel.Program, error) {
	ast, iss := env.Parse(expr)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("parse %q: %w", expr, iss.Err())
	}
	return env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(100))
}

func fluxEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		ext.Encoders(),
	)
}

func groupOf(apiVersion string) string {
	if i := strings.Index(apiVersion, "/"); i >= 0 {
		return apiVersion[:i]
	}
	return ""
}

// evaluate returns current, inProgress, failed or unknown, and what decided it.
func evaluate(env *cel.Env, e exprEntry, obj map[string]any) (string, string) {
	if st, ok := obj["status"].(map[string]any); ok {
		if og, ok := st["observedGeneration"].(int64); ok {
			md, _ := obj["metadata"].(map[string]any)
			if g, ok := md["generation"].(int64); ok && g != og {
				return "inProgress", "status.observedGeneration differs from metadata.generation"
			}
		}
	}
	for _, step := range []struct{ name, expr string }{
		{"inProgress", e.InProgress}, {"failed", e.Failed}, {"current", e.Current},
	} {
		if step.expr == "" {
			continue
		}
		prg, err := program(env, step.expr)
		if err != nil {
			return "unknown", err.Error()
		}
		val, _, err := prg.ContextEval(context.Background(), obj)
		if err != nil {
			return "unknown", fmt.Sprintf("%s: %v", step.name, err)
		}
		b, ok := val.(types.Bool)
		if !ok {
			return "unknown", fmt.Sprintf("%s: not a bool: %v", step.name, val)
		}
		if b {
			return step.name, "expression " + step.name + " is true"
		}
	}
	return "inProgress", "no expression is true"
}

func fluxCmd(exprsPath string, cases []string) error {
	list, err := readExprs(exprsPath)
	if err != nil {
		return err
	}
	env, err := fluxEnv()
	if err != nil {
		return err
	}
	for _, e := range list {
		if e.Current == "" {
			return fmt.Errorf("%s %s: current is required", e.APIVersion, e.Kind)
		}
		for _, x := range []string{e.Current, e.InProgress, e.Failed} {
			if x == "" {
				continue
			}
			if _, err := program(env, x); err != nil {
				return fmt.Errorf("%s %s: %w", e.APIVersion, e.Kind, err)
			}
		}
	}
	for _, path := range cases {
		c, err := readCase(path)
		if err != nil {
			return err
		}
		obj := c["object"].(map[string]any)
		av, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		result, detail := "none", "no healthCheckExprs entry for "+groupOf(av)+"/"+kind
		for _, e := range list {
			// kustomize-controller matches entries by group and kind.
			if groupOf(e.APIVersion) == groupOf(av) && e.Kind == kind {
				result, detail = evaluate(env, e, obj)
				break
			}
		}
		fmt.Printf("%s\t%s\t%s\n", path, result, strings.ReplaceAll(detail, "\n", " "))
	}
	return nil
}

func getCmd(path, field string) error {
	c, err := readCase(path)
	if err != nil {
		return err
	}
	switch v := c[field].(type) {
	case nil:
	case []any:
		for _, x := range v {
			fmt.Println(x)
		}
	case map[string]any:
		return fmt.Errorf("%s: %s is a map", path, field)
	default:
		fmt.Println(v)
	}
	return nil
}

// luaCmd prints the object as Argo CD hands it to a health script: maps and lists as
// tables (lists from index 1), numbers, strings, booleans; null as nil.
func luaCmd(path string) error {
	c, err := readCase(path)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("return ")
	writeLua(&b, c["object"], 0)
	b.WriteString("\n")
	_, err = os.Stdout.WriteString(b.String())
	return err
}

func writeLua(b *strings.Builder, v any, depth int) {
	pad := strings.Repeat("  ", depth+1)
	switch t := v.(type) {
	case nil:
		b.WriteString("nil")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case int64:
		b.WriteString(strconv.FormatInt(t, 10))
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			b.WriteString("0/0")
		} else {
			b.WriteString(strconv.FormatFloat(t, 'g', 17, 64))
		}
	case string:
		b.WriteString(luaString(t))
	case []any:
		b.WriteString("{\n")
		for i, x := range t {
			fmt.Fprintf(b, "%s[%d] = ", pad, i+1)
			writeLua(b, x, depth+1)
			b.WriteString(",\n")
		}
		b.WriteString(strings.Repeat("  ", depth) + "}")
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("{\n")
		for _, k := range keys {
			fmt.Fprintf(b, "%s[%s] = ", pad, luaString(k))
			writeLua(b, t[k], depth+1)
			b.WriteString(",\n")
		}
		b.WriteString(strings.Repeat("  ", depth) + "}")
	default:
		fmt.Fprintf(b, "nil --[[ unsupported %T ]]", v)
	}
}

// luaString quotes s for Lua 5.1, which knows decimal escapes (\ddd) but not \x or \u.
func luaString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\%03d`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// withoutTimes drops every lastTransitionTime, the one field a re-render changes.
func withoutTimes(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range t {
			if k != "lastTransitionTime" {
				out[k] = withoutTimes(x)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = withoutTimes(x)
		}
		return out
	default:
		return v
	}
}

func driftCmd(casePath, rendered string) error {
	c, err := readCase(casePath)
	if err != nil {
		return err
	}
	obj := c["object"].(map[string]any)
	md, _ := obj["metadata"].(map[string]any)
	raw, err := os.ReadFile(rendered)
	if err != nil {
		return err
	}
	for i, doc := range strings.Split("\n"+string(raw), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		v, err := decodeYAML([]byte(doc), fmt.Sprintf("%s document %d", rendered, i))
		if err != nil {
			return err
		}
		d, ok := v.(map[string]any)
		if !ok {
			continue
		}
		dm, _ := d["metadata"].(map[string]any)
		if d["kind"] != obj["kind"] || dm["name"] != md["name"] || dm["namespace"] != md["namespace"] {
			continue
		}
		if _, ok := d["status"]; !ok {
			continue
		}
		want, got := withoutTimes(d["status"]), withoutTimes(obj["status"])
		if reflect.DeepEqual(want, got) {
			return nil
		}
		w, _ := json.MarshalIndent(want, "", "  ")
		g, _ := json.MarshalIndent(got, "", "  ")
		return fmt.Errorf("%s: the captured status is not what render prints now\nrender:\n%s\ncase:\n%s", casePath, w, g)
	}
	return fmt.Errorf("%s: render printed no status for %v %v/%v", casePath, obj["kind"], md["namespace"], md["name"])
}
