// Command classify lists the upstream conformance tests (tests.ConformanceTests) at the
// version pinned in ../go.mod, and sorts them into status-only tests and traffic tests.
// tests/conformance/skip-tests.txt and status-only-tests.txt are its output, and
// FINDINGS.md explains the rules. Run it from tests/conformance:
//
//	go run ./classify                          # a table, one test per line
//	go run ./classify -skip                    # the traffic tests (skip-tests.txt)
//	go run ./classify -status                  # the status-only tests (status-only-tests.txt)
//	go run ./classify -profiles GATEWAY-GRPC   # only the tests of these profiles
//
// Both lists cover every test of the suite, whatever its profile (GATEWAY-HTTP, -GRPC,
// -TLS, -TCP, -UDP, or none: a test needing HTTPRoute and TLSRoute belongs to no single
// profile), because the suite runs a test whenever the GatewayClass claims all of its
// features, whichever profiles were asked for. So a profile added to tests/conformance/run
// needs no new list.
//
// A test is traffic when its Test function can reach, through static calls, closures and
// function values inside the conformance module, a function of a package that sends
// requests (the suite's http/tls/grpc/tcp/udp/websocket/weight/roundtripper/echo helpers,
// the echo servers' module sigs.k8s.io/gateway-api-conformance-images, net/http, crypto/tls, gRPC, websocket, DNS, net dialing, listening and lookups), reads the suite's
// RoundTripper or GRPCClient, or calls a method of the RoundTripper interface. Two
// references are not traffic: net's address helpers (SplitHostPort, ParseIP, ...), and the https:// branch of
// the manifest loader (getContentsFromPathOrURL), which the built-in tests never take.
package main

import (
	"flag"
	"fmt"
	"go/types"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/ssa"
	"golang.org/x/tools/go/ssa/ssautil"

	"sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
)

const module = "sigs.k8s.io/gateway-api/conformance"

// Packages whose functions send or receive traffic.
var trafficPkgs = []string{
	module + "/utils/http",
	module + "/utils/tls",
	module + "/utils/grpc",
	module + "/utils/tcp",
	module + "/utils/udp",
	module + "/utils/websocket",
	module + "/utils/weight",
	module + "/utils/roundtripper",
	module + "/utils/echo",
	// The echo servers' client-side types, a module of their own since v1.7.0.
	"sigs.k8s.io/gateway-api-conformance-images",
	"net/http",
	"crypto/tls",
	"google.golang.org/grpc",
	"golang.org/x/net/websocket",
	"github.com/gorilla/websocket",
	"github.com/miekg/dns",
}

type facts struct {
	traffic []string // what makes it a traffic test, sorted; empty when none
	nmbr    bool     // reaches kubernetes.NamespacesMustBeReady
	address bool     // reaches a wait for a Gateway address
}

// The Gateway profiles of the suite, in the order the table prints them.
var profiles = []suite.ConformanceProfile{
	suite.GatewayHTTPConformanceProfile,
	suite.GatewayGRPCConformanceProfile,
	suite.GatewayTLSConformanceProfile,
	suite.GatewayTCPConformanceProfile,
	suite.GatewayUDPConformanceProfile,
}

func main() {
	skip := flag.Bool("skip", false, "print the traffic tests, one per line, after a header comment")
	status := flag.Bool("status", false, "print the status-only tests, one per line (name, profiles, features), after a header comment")
	only := flag.String("profiles", "", "comma-separated profile names: only the tests that belong to one of them")
	flag.Parse()

	want := map[string]bool{}
	if *only != "" {
		known := map[string]bool{}
		for _, p := range profiles {
			known[string(p.Name)] = true
		}
		for _, n := range strings.Split(*only, ",") {
			if !known[n] {
				fail("unknown profile %q", n)
			}
			want[n] = true
		}
	}

	cfg := &packages.Config{Mode: packages.LoadSyntax}
	initial, err := packages.Load(cfg, module+"/...")
	if err != nil {
		fail("loading packages: %v", err)
	}
	if packages.PrintErrors(initial) > 0 {
		fail("packages had errors")
	}
	prog, _ := ssautil.Packages(initial, ssa.InstantiateGenerics)
	prog.Build()

	// Every function with a body, by "file:line" of its declaration.
	byPos := map[string]*ssa.Function{}
	for fn := range ssautil.AllFunctions(prog) {
		if fn.Blocks == nil || !fn.Pos().IsValid() {
			continue
		}
		p := prog.Fset.Position(fn.Pos())
		byPos[fmt.Sprintf("%s:%d", filepath.Base(p.Filename), p.Line)] = fn
	}

	type row struct {
		name        string
		in          []string // "PROFILE:core" or "PROFILE:extended", in profile order
		provisional bool
		parallel    bool
		feats       []string
		f           facts
		where       string
	}
	var rows []row
	counts := map[string]int{}
	for _, t := range tests.ConformanceTests {
		var feats []string
		for _, f := range t.Features {
			feats = append(feats, string(f))
		}
		// The suite's own rule (getConformanceProfilesForTest, isTestExtended): a test is
		// in a profile when every feature is in it; core when every feature is core.
		var in []string
		selected := len(want) == 0
		for _, p := range profiles {
			class := "core"
			for _, f := range t.Features {
				switch {
				case p.CoreFeatures.Has(f):
				case p.ExtendedFeatures.Has(f):
					if class == "core" {
						class = "extended"
					}
				default:
					class = ""
				}
				if class == "" {
					break
				}
			}
			if class != "" {
				in = append(in, string(p.Name)+":"+class)
				counts[string(p.Name)+" "+class]++
				if want[string(p.Name)] {
					selected = true
				}
			}
		}
		if len(in) == 0 {
			counts["none"]++
		}
		if !selected {
			continue
		}
		pc := reflect.ValueOf(t.Test).Pointer()
		rf := runtime.FuncForPC(pc)
		file, line := rf.FileLine(pc)
		where := fmt.Sprintf("%s:%d", filepath.Base(file), line)
		fn := byPos[where]
		if fn == nil {
			fail("%s: no SSA function at %s (%s)", t.ShortName, where, rf.Name())
		}
		rows = append(rows, row{t.ShortName, in, t.Provisional, t.Parallel, feats, analyse(fn), where})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	version := moduleVersion(module)
	scope := "every test"
	if *only != "" {
		scope = "the tests of " + *only
	}
	switch {
	case *skip:
		fmt.Printf("# Traffic tests of %s %s, %s: go run ./classify -skip\n", module, version, scope)
	case *status:
		fmt.Printf("# Status-only tests of %s %s, %s: go run ./classify -status\n", module, version, scope)
		fmt.Printf("# name, profiles it belongs to (none: no single profile has all its features), features\n")
	default:
		var parts []string
		for _, p := range profiles {
			n := string(p.Name)
			parts = append(parts, fmt.Sprintf("%s %d core + %d extended", n, counts[n+" core"], counts[n+" extended"]))
		}
		fmt.Fprintf(os.Stderr, "%s %s: %d tests; %s; %d in no profile\n",
			module, version, len(tests.ConformanceTests), strings.Join(parts, ", "), counts["none"])
	}

	for _, r := range rows {
		in := strings.Join(r.in, ",")
		if in == "" {
			in = "none"
		}
		switch {
		case *skip:
			if len(r.f.traffic) > 0 {
				fmt.Println(r.name)
			}
		case *status:
			if len(r.f.traffic) == 0 {
				fmt.Printf("%s\t%s\t%s\n", r.name, in, strings.Join(r.feats, ","))
			}
		default:
			kind := "status"
			if len(r.f.traffic) > 0 {
				kind = "traffic: " + strings.Join(r.f.traffic, " ")
			}
			fmt.Printf("%s\t%s\tprovisional=%t\tparallel=%t\tnmbr=%t\taddress=%t\t%s\t%s\t%s\n",
				r.name, in, r.provisional, r.parallel, r.f.nmbr, r.f.address,
				strings.Join(r.feats, ","), r.where, kind)
		}
	}
}

// moduleVersion is the version of a module this program was built with (go.mod's).
func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return "(unknown version)"
}

// analyse walks everything the test function reaches inside the conformance module.
func analyse(root *ssa.Function) facts {
	var out facts
	seen := map[*ssa.Function]bool{}
	queue := []*ssa.Function{root}
	reasons := map[string]bool{}
	note := func(reason string) { reasons[reason] = true }
	visitCallee := func(from, fn *ssa.Function) {
		if fn == nil {
			return
		}
		if fn.Origin() != nil {
			fn = fn.Origin()
		}
		pkg := pkgPath(fn)
		name := fn.Name()
		switch {
		case pkg == module+"/utils/kubernetes" && name == "NamespacesMustBeReady":
			out.nmbr = true
		case pkg == module+"/utils/kubernetes" && (name == "WaitForGatewayAddress" || name == "GatewayMustHaveAddress"):
			out.address = true
		}
		if isTraffic(pkg, name) && from.Name() != "getContentsFromPathOrURL" {
			note(pkg + "." + name)
		}
		if strings.HasPrefix(pkg, module) && !seen[fn] {
			seen[fn] = true
			queue = append(queue, fn)
		}
	}
	seen[root] = true
	for len(queue) > 0 {
		fn := queue[0]
		queue = queue[1:]
		for _, anon := range fn.AnonFuncs {
			visitCallee(fn, anon)
		}
		for _, b := range fn.Blocks {
			for _, ins := range b.Instrs {
				switch v := ins.(type) {
				case *ssa.MakeClosure:
					visitCallee(fn, v.Fn.(*ssa.Function))
				case *ssa.FieldAddr:
					checkField(v.X.Type(), v.Field, note)
				case *ssa.Field:
					checkField(v.X.Type(), v.Field, note)
				case ssa.CallInstruction:
					c := v.Common()
					if c.IsInvoke() {
						if named := namedOf(c.Value.Type()); named != nil && named.Obj().Pkg() != nil &&
							named.Obj().Pkg().Path() == module+"/utils/roundtripper" {
							note("RoundTripper." + c.Method.Name())
						}
					} else if callee := c.StaticCallee(); callee != nil {
						visitCallee(fn, callee)
					}
				}
				// Function values passed around (callbacks, method values).
				var ops []*ssa.Value
				for _, op := range ins.Operands(ops) {
					if op == nil {
						continue
					}
					if f, ok := (*op).(*ssa.Function); ok {
						visitCallee(fn, f)
					}
				}
			}
		}
	}
	for r := range reasons {
		out.traffic = append(out.traffic, strings.TrimPrefix(r, module+"/utils/"))
	}
	sort.Strings(out.traffic)
	return out
}

func checkField(t types.Type, i int, note func(string)) {
	if p, ok := t.Underlying().(*types.Pointer); ok {
		t = p.Elem()
	}
	named := namedOf(t)
	st, ok := t.Underlying().(*types.Struct)
	if !ok || named == nil || named.Obj().Name() != "ConformanceTestSuite" {
		return
	}
	if f := st.Field(i).Name(); f == "RoundTripper" || f == "GRPCClient" {
		note("suite." + f)
	}
}

func namedOf(t types.Type) *types.Named {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, _ := t.(*types.Named)
	return n
}

func pkgPath(fn *ssa.Function) string {
	if fn.Pkg != nil {
		return fn.Pkg.Pkg.Path()
	}
	if obj, ok := fn.Object().(*types.Func); ok && obj.Pkg() != nil {
		return obj.Pkg().Path()
	}
	return ""
}

func isTraffic(pkg, name string) bool {
	if pkg == "net" { // dialing, listening and lookups; address helpers are not traffic
		return strings.HasPrefix(name, "Dial") || strings.HasPrefix(name, "Listen") || strings.HasPrefix(name, "Lookup")
	}
	return slices.ContainsFunc(trafficPkgs, func(p string) bool {
		return pkg == p || strings.HasPrefix(pkg, p+"/")
	})
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "classify: "+format+"\n", args...)
	os.Exit(1)
}
