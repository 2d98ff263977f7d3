package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sdkPackages maps the package names the README writes (shared.Prepare,
// plugin.Serve, …) to their directories in the SDK module.
var sdkPackages = map[string]string{
	"shared":      "shared",
	"plugin":      "shared/plugin",
	"conformance": "shared/conformance",
	"runner":      "runner",
	"validator":   "validator",
}

// TestREADMENamesRealAPI: every SDK name the README writes in a code span
// (shared.X, plugin.X, runner.T.M, …) is declared by that package of the
// module this example builds against, so the README cannot send a reader
// to an entry point that does not exist.
func TestREADMENamesRealAPI(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-mod=mod", "-m", "-f", "{{.Dir}}", "github.com/orqest/sandbox").Output()
	if err != nil {
		t.Fatalf("go list the SDK module: %v", err)
	}
	root := strings.TrimSpace(string(out))

	// Fenced blocks are shell and HCL; the Go names are in code spans.
	text := regexp.MustCompile("(?s)```.*?```").ReplaceAllString(string(readme), "")
	ref := regexp.MustCompile(`\b([a-z]+)\.([A-Z]\w*)(?:\.([A-Z]\w*))?(\*)?`)
	declared := map[string]map[string]bool{}
	checked := 0
	for _, span := range regexp.MustCompile("`[^`\n]+`").FindAllString(text, -1) {
		for _, m := range ref.FindAllStringSubmatch(span, -1) {
			pkg, name, member, glob := m[1], m[2], m[3], m[4]
			dir, ok := sdkPackages[pkg]
			if !ok || (glob != "" && member == "") { // shared.Err*: a family of names
				continue
			}
			if declared[pkg] == nil {
				declared[pkg] = exportedNames(t, filepath.Join(root, dir))
			}
			key := name
			if member != "" {
				key = name + "." + member
			}
			checked++
			if !declared[pkg][key] {
				t.Errorf("README names %s.%s in %s, which package %s does not declare", pkg, key, span, dir)
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no SDK names in README.md: the pattern no longer matches how it writes them")
	}
}

// exportedNames returns the exported top-level names of the Go package in
// dir, and Type.Member for the methods and struct fields of its types.
func exportedNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					names[d.Name.Name] = true
					continue
				}
				typ := d.Recv.List[0].Type
				if star, ok := typ.(*ast.StarExpr); ok {
					typ = star.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					names[id.Name+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = true
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, field := range st.Fields.List {
								for _, n := range field.Names {
									names[s.Name.Name+"."+n.Name] = true
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					}
				}
			}
		}
	}
	return names
}
