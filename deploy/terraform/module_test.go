// Package terraform_test validates the Terraform module in this directory
// and its examples without AWS and without Terraform's providers: it parses
// every .tf file with HCL and checks the arguments and blocks against a
// hand-pinned subset of the AWS provider schema (testdata), the references,
// the table's layout and the tenant policies' key prefixes against package
// store/dynamodb, the functions against `make lambda`, and the alarms'
// metrics against a list of CloudWatch metrics; `terraform fmt` and
// `terraform validate` run where they can.
package terraform_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// module is one Terraform module's parsed configuration.
type module struct {
	dir       string
	files     []string // names, sorted
	variables map[string]*hclsyntax.Block
	locals    map[string]*hclsyntax.Attribute
	outputs   map[string]*hclsyntax.Block
	resources map[string]*hclsyntax.Block // "type.name"
	data      map[string]*hclsyntax.Block // "type.name"
	modules   map[string]*hclsyntax.Block
	providers []*hclsyntax.Block
	others    []*hclsyntax.Block // terraform and any other top-level block
	problems  []string           // parse errors and duplicate declarations
}

// readModule returns the .tf files of dir (not of its subdirectories), by
// name.
func readModule(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatalf("no .tf files in %s", dir)
	}
	files := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(n)] = b
	}
	return files
}

// loadModule parses dir's .tf files; the test fails on a parse error.
func loadModule(t *testing.T, dir string) *module {
	t.Helper()
	m := parseModule(dir, readModule(t, dir))
	if len(m.problems) > 0 {
		t.Fatalf("%s:\n%s", dir, strings.Join(m.problems, "\n"))
	}
	return m
}

// parseModule parses files (name -> source) as the module in dir.
func parseModule(dir string, files map[string][]byte) *module {
	m := &module{
		dir:       dir,
		variables: map[string]*hclsyntax.Block{},
		locals:    map[string]*hclsyntax.Attribute{},
		outputs:   map[string]*hclsyntax.Block{},
		resources: map[string]*hclsyntax.Block{},
		data:      map[string]*hclsyntax.Block{},
		modules:   map[string]*hclsyntax.Block{},
	}
	for name := range files {
		m.files = append(m.files, name)
	}
	sort.Strings(m.files)
	p := hclparse.NewParser()
	declare := func(kind string, into map[string]*hclsyntax.Block, key string, b *hclsyntax.Block) {
		if prev, ok := into[key]; ok {
			m.problems = append(m.problems, fmt.Sprintf("%s: %s %s declared again (first at %s)", pos(b.DefRange()), kind, key, pos(prev.DefRange())))
			return
		}
		into[key] = b
	}
	for _, name := range m.files {
		f, diags := p.ParseHCL(files[name], name)
		if diags.HasErrors() {
			m.problems = append(m.problems, diags.Error())
			continue
		}
		body := f.Body.(*hclsyntax.Body)
		for _, a := range body.Attributes {
			m.problems = append(m.problems, fmt.Sprintf("%s: attribute %s outside any block", pos(a.SrcRange), a.Name))
		}
		for _, b := range body.Blocks {
			switch {
			case b.Type == "variable" && len(b.Labels) == 1:
				declare("variable", m.variables, b.Labels[0], b)
			case b.Type == "output" && len(b.Labels) == 1:
				declare("output", m.outputs, b.Labels[0], b)
			case b.Type == "resource" && len(b.Labels) == 2:
				declare("resource", m.resources, b.Labels[0]+"."+b.Labels[1], b)
			case b.Type == "data" && len(b.Labels) == 2:
				declare("data source", m.data, b.Labels[0]+"."+b.Labels[1], b)
			case b.Type == "module" && len(b.Labels) == 1:
				declare("module", m.modules, b.Labels[0], b)
			case b.Type == "provider":
				m.providers = append(m.providers, b)
			case b.Type == "locals":
				for name, a := range b.Body.Attributes {
					if prev, ok := m.locals[name]; ok {
						m.problems = append(m.problems, fmt.Sprintf("%s: local %s declared again (first at %s)", pos(a.SrcRange), name, pos(prev.SrcRange)))
					}
					m.locals[name] = a
				}
				for _, nb := range b.Body.Blocks {
					m.problems = append(m.problems, fmt.Sprintf("%s: block %s inside locals", pos(nb.DefRange()), nb.Type))
				}
			default:
				m.others = append(m.others, b)
			}
		}
	}
	return m
}

// pos renders a range as file:line.
func pos(r hcl.Range) string { return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line) }

// attrs returns body's attributes sorted by position, so that problems
// come out in a stable order.
func attrs(body *hclsyntax.Body) []*hclsyntax.Attribute {
	list := make([]*hclsyntax.Attribute, 0, len(body.Attributes))
	for _, a := range body.Attributes {
		list = append(list, a)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].SrcRange.Start.Byte < list[j].SrcRange.Start.Byte })
	return list
}

// keys returns m's keys, sorted.
func keys[V any](m map[string]V) []string {
	list := make([]string, 0, len(m))
	for k := range m {
		list = append(list, k)
	}
	sort.Strings(list)
	return list
}

// blockSchema is one resource, data source or nested block in the pinned
// provider schema (testdata/aws_provider_schema.json).
type blockSchema struct {
	Attributes []string                `json:"attributes"`
	Computed   []string                `json:"computed"`
	Required   []string                `json:"required"`
	Blocks     map[string]*blockSchema `json:"blocks"`
}

func (s *blockSchema) hasAttribute(name string) bool {
	for _, a := range s.Attributes {
		if a == name {
			return true
		}
	}
	return false
}

// exports reports whether name can be read from an instance: an argument
// or a computed attribute.
func (s *blockSchema) exports(name string) bool {
	if s.hasAttribute(name) || s.Blocks[name] != nil {
		return true
	}
	for _, a := range s.Computed {
		if a == name {
			return true
		}
	}
	return false
}

type providerSchema struct {
	Provider      string                  `json:"provider"`
	Version       string                  `json:"version"`
	ProviderBlock *blockSchema            `json:"provider_block"`
	Resources     map[string]*blockSchema `json:"resources"`
	DataSources   map[string]*blockSchema `json:"data_sources"`
}

func loadSchema(t *testing.T) *providerSchema {
	t.Helper()
	var s providerSchema
	readJSON(t, "testdata/aws_provider_schema.json", &s)
	if len(s.Resources) == 0 || len(s.DataSources) == 0 || s.ProviderBlock == nil {
		t.Fatal("testdata/aws_provider_schema.json: no resources, data sources or provider block")
	}
	return &s
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// The module, its example, and the repository around them.
const (
	moduleDir  = "."
	exampleDir = "examples/basic"
	repoRoot   = "../.."
)

// mutate returns a copy of files where file's first occurrence of old is
// new; the test fails if old is not there.
func mutate(t *testing.T, files map[string][]byte, file, old, new string) map[string][]byte {
	t.Helper()
	src, ok := files[file]
	if !ok {
		t.Fatalf("no file %s", file)
	}
	if !strings.Contains(string(src), old) {
		t.Fatalf("%s does not contain %q", file, old)
	}
	out := map[string][]byte{}
	for k, v := range files {
		out[k] = v
	}
	out[file] = []byte(strings.Replace(string(src), old, new, 1))
	return out
}
