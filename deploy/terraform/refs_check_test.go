package terraform_test

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// knownFunctions are Terraform's built-in functions that this module may
// call (a subset; add to it when the module uses another).
var knownFunctions = map[string]bool{
	"abs": true, "alltrue": true, "anytrue": true, "base64encode": true, "can": true, "ceil": true,
	"coalesce": true, "compact": true, "concat": true, "contains": true, "distinct": true, "element": true,
	"endswith": true, "file": true, "filebase64": true, "filebase64sha256": true, "flatten": true,
	"floor": true, "format": true, "formatlist": true, "join": true, "jsonencode": true, "keys": true,
	"length": true, "lookup": true, "lower": true, "max": true, "merge": true, "min": true, "one": true,
	"regex": true, "replace": true, "sort": true, "split": true, "startswith": true, "substr": true,
	"templatefile": true, "tolist": true, "tomap": true, "tonumber": true, "toset": true, "tostring": true,
	"trimprefix": true, "trimsuffix": true, "try": true, "upper": true, "values": true, "yamldecode": true, "zipmap": true,
}

// Module block arguments that are not the called module's variables.
var moduleMeta = map[string]bool{"source": true, "version": true, "count": true, "for_each": true, "providers": true, "depends_on": true}

// scope is what a reference may use where it is: each (in a for_each
// block), count (in a count block), dynamic blocks' iterators.
type scope struct {
	each, count bool
	iters       map[string]bool
}

func (s scope) with(iter string) scope {
	iters := map[string]bool{iter: true}
	for k := range s.iters {
		iters[k] = true
	}
	return scope{each: s.each, count: s.count, iters: iters}
}

type refChecker struct {
	m          *module
	s          *providerSchema
	load       func(dir string) (*module, error)
	probs      []string
	usedVars   map[string]bool
	usedLocals map[string]bool
}

// referenceProblems checks every reference of m: var, local, resource,
// data, module (and the called module's outputs), each, count, path and
// dynamic iterators resolve, instances of count/for_each resources are
// indexed and others are not, attributes read from resources exist in the
// pinned schema, functions are Terraform's; every variable and local is
// used, every output refers to something, and every module call passes
// only variables the called module declares and all it requires. load
// parses a called module's directory.
func referenceProblems(m *module, s *providerSchema, load func(dir string) (*module, error)) []string {
	c := &refChecker{m: m, s: s, load: load, usedVars: map[string]bool{}, usedLocals: map[string]bool{}}
	for _, name := range keys(m.variables) {
		b := m.variables[name]
		for _, a := range attrs(b.Body) {
			switch a.Name {
			case "type": // a type expression, not references
			case "default":
				if len(hclsyntax.Variables(a.Expr)) > 0 {
					c.add(a.SrcRange, "variable %s: a default cannot refer to anything", name)
				}
			default:
				c.expr(a.Expr, scope{})
			}
		}
		for _, v := range b.Body.Blocks {
			c.body(v.Body, scope{})
		}
	}
	for _, name := range keys(m.locals) {
		c.expr(m.locals[name].Expr, scope{})
	}
	for _, name := range keys(m.outputs) {
		b := m.outputs[name]
		if v := b.Body.Attributes["value"]; v != nil && len(hclsyntax.Variables(v.Expr)) == 0 {
			c.add(v.SrcRange, "output %s refers to nothing", name)
		}
		c.body(b.Body, scope{})
	}
	for _, blocks := range []map[string]*hclsyntax.Block{m.resources, m.data, m.modules} {
		for _, key := range keys(blocks) {
			b := blocks[key]
			sc := scope{each: b.Body.Attributes["for_each"] != nil, count: b.Body.Attributes["count"] != nil}
			if fe := b.Body.Attributes["for_each"]; fe != nil {
				c.expr(fe.Expr, scope{}) // each is not defined in its own for_each
			}
			if n := b.Body.Attributes["count"]; n != nil {
				c.expr(n.Expr, scope{})
			}
			c.body(b.Body, sc)
		}
	}
	for _, key := range keys(m.resources) {
		c.ignoredArguments(m.resources[key])
	}
	for _, b := range m.providers {
		c.body(b.Body, scope{})
	}
	for _, name := range keys(m.modules) {
		c.moduleCall(name, m.modules[name])
	}
	for _, name := range keys(m.variables) {
		if !c.usedVars[name] {
			c.add(m.variables[name].DefRange(), "variable %s is declared but never used", name)
		}
	}
	for _, name := range keys(m.locals) {
		if !c.usedLocals[name] {
			c.add(m.locals[name].SrcRange, "local %s is declared but never used", name)
		}
	}
	return c.probs
}

func (c *refChecker) add(r hcl.Range, format string, args ...any) {
	c.probs = append(c.probs, pos(r)+": "+fmt.Sprintf(format, args...))
}

// body checks the attributes and nested blocks of body (for_each and count
// of a resource itself are checked by the caller).
func (c *refChecker) body(body *hclsyntax.Body, sc scope) {
	for _, a := range attrs(body) {
		if a.Name == "for_each" || a.Name == "count" {
			if sc.each || sc.count { // the block's own: checked by the caller
				continue
			}
		}
		c.expr(a.Expr, sc)
	}
	for _, b := range body.Blocks {
		if b.Type == "lifecycle" {
			c.lifecycle(b.Body, sc)
			continue
		}
		if b.Type != "dynamic" {
			c.body(b.Body, sc)
			continue
		}
		iter := ""
		if len(b.Labels) == 1 {
			iter = b.Labels[0]
		}
		for _, a := range attrs(b.Body) {
			switch a.Name {
			case "iterator":
				iter = hcl.ExprAsKeyword(a.Expr)
			case "for_each":
				c.expr(a.Expr, sc)
			}
		}
		for _, a := range attrs(b.Body) {
			if a.Name == "labels" {
				c.expr(a.Expr, sc.with(iter))
			}
		}
		for _, content := range b.Body.Blocks {
			c.body(content.Body, sc.with(iter))
		}
	}
}

// lifecycle checks a resource's lifecycle block: ignore_changes names
// arguments, not references (they are checked against the schema by
// resourceLifecycle); the rest are expressions.
func (c *refChecker) lifecycle(body *hclsyntax.Body, sc scope) {
	for _, a := range attrs(body) {
		if a.Name != "ignore_changes" {
			c.expr(a.Expr, sc)
		}
	}
	for _, b := range body.Blocks {
		c.body(b.Body, sc)
	}
}

// ignoredArguments checks that the ignore_changes of resource b name its
// arguments (or are the keyword all).
func (c *refChecker) ignoredArguments(b *hclsyntax.Block) {
	s := c.s.Resources[b.Labels[0]]
	for _, lc := range b.Body.Blocks {
		a := lc.Body.Attributes["ignore_changes"]
		if lc.Type != "lifecycle" || a == nil || s == nil || hcl.ExprAsKeyword(a.Expr) == "all" {
			continue
		}
		for _, tr := range hclsyntax.Variables(a.Expr) {
			if name := tr.RootName(); !s.hasAttribute(name) && s.Blocks[name] == nil {
				c.add(tr.SourceRange(), "ignore_changes names %s, which is not an argument of %s", name, b.Labels[0])
			}
		}
	}
}

func (c *refChecker) expr(e hclsyntax.Expression, sc scope) {
	for _, tr := range hclsyntax.Variables(e) {
		c.traversal(tr, sc)
	}
	hclsyntax.VisitAll(e, func(n hclsyntax.Node) hcl.Diagnostics {
		if f, ok := n.(*hclsyntax.FunctionCallExpr); ok && !knownFunctions[f.Name] {
			c.add(f.NameRange, "unknown function %s", f.Name)
		}
		return nil
	})
}

// step returns the name of tr's i-th step if it is an attribute access.
func step(tr hcl.Traversal, i int) string {
	if i >= len(tr) {
		return ""
	}
	switch s := tr[i].(type) {
	case hcl.TraverseAttr:
		return s.Name
	case hcl.TraverseRoot:
		return s.Name
	}
	return ""
}

func (c *refChecker) traversal(tr hcl.Traversal, sc scope) {
	r := tr.SourceRange()
	root := tr.RootName()
	name := step(tr, 1)
	switch root {
	case "var":
		if c.m.variables[name] == nil {
			c.add(r, "var.%s is not declared", name)
		}
		c.usedVars[name] = true
	case "local":
		if c.m.locals[name] == nil {
			c.add(r, "local.%s is not declared", name)
		}
		c.usedLocals[name] = true
	case "each":
		if !sc.each {
			c.add(r, "each.%s outside a block with for_each", name)
		} else if name != "key" && name != "value" {
			c.add(r, "each.%s: each has key and value", name)
		}
	case "count":
		if !sc.count {
			c.add(r, "count.%s outside a block with count", name)
		} else if name != "index" {
			c.add(r, "count.%s: count has index", name)
		}
	case "path":
		if name != "module" && name != "root" && name != "cwd" {
			c.add(r, "path.%s: path has module, root and cwd", name)
		}
	case "terraform":
		if name != "workspace" {
			c.add(r, "terraform.%s: terraform has workspace", name)
		}
	case "self":
		c.add(r, "self outside a provisioner")
	case "data":
		key := name + "." + step(tr, 2)
		b := c.m.data[key]
		if b == nil {
			c.add(r, "data.%s is not declared", key)
			return
		}
		c.instanceAccess(tr[3:], r, "data."+key, b, c.s.DataSources[name])
	case "module":
		b := c.m.modules[name]
		if b == nil {
			c.add(r, "module.%s is not declared", name)
			return
		}
		rest := tr[2:]
		if b.Body.Attributes["count"] != nil || b.Body.Attributes["for_each"] != nil {
			if len(rest) > 0 {
				rest = rest[1:]
			}
		}
		if len(rest) == 0 {
			return
		}
		out, ok := rest[0].(hcl.TraverseAttr)
		if !ok {
			c.add(r, "module.%s: malformed reference", name)
			return
		}
		if child := c.child(b); child != nil && child.outputs[out.Name] == nil {
			c.add(r, "module.%s.%s: the module has no such output", name, out.Name)
		}
	default:
		switch {
		case sc.iters[root]:
			if name != "key" && name != "value" {
				c.add(r, "%s.%s: a dynamic block's iterator has key and value", root, name)
			}
		case c.m.resources[root+"."+name] != nil:
			c.instanceAccess(tr[2:], r, root+"."+name, c.m.resources[root+"."+name], c.s.Resources[root])
		case strings.Contains(root, "_") && name != "":
			c.add(r, "%s.%s: no such resource", root, name)
		default:
			c.add(r, "%s: unknown reference", root)
		}
	}
}

// instanceAccess checks what follows a resource's or data source's name:
// an instance key exactly when it has count or for_each, then an attribute
// it exports.
func (c *refChecker) instanceAccess(rest hcl.Traversal, r hcl.Range, what string, b *hclsyntax.Block, s *blockSchema) {
	if len(rest) == 0 {
		return // the whole object, or the collection of instances
	}
	_, indexed := rest[0].(hcl.TraverseIndex)
	multi := b.Body.Attributes["count"] != nil || b.Body.Attributes["for_each"] != nil
	switch {
	case multi && !indexed:
		c.add(r, "%s has count or for_each: name an instance (%s[...])", what, what)
		return
	case !multi && indexed:
		c.add(r, "%s has neither count nor for_each: it cannot be indexed", what)
		return
	case multi:
		rest = rest[1:]
	}
	if len(rest) == 0 || s == nil {
		return
	}
	if a, ok := rest[0].(hcl.TraverseAttr); ok && !s.exports(a.Name) {
		c.add(r, "%s has no attribute %s in the pinned schema", what, a.Name)
	}
}

// child loads the module a module block calls (local sources only).
func (c *refChecker) child(b *hclsyntax.Block) *module {
	src, diags := b.Body.Attributes["source"].Expr.Value(nil)
	if diags.HasErrors() || !src.IsKnown() || src.IsNull() {
		c.add(b.DefRange(), "module %s: source must be a literal string", b.Labels[0])
		return nil
	}
	s := src.AsString()
	if !strings.HasPrefix(s, "./") && !strings.HasPrefix(s, "../") {
		return nil // a registry or remote module: not checked here
	}
	child, err := c.load(filepath.Join(c.m.dir, s))
	if err != nil {
		c.add(b.DefRange(), "module %s: %v", b.Labels[0], err)
		return nil
	}
	return child
}

// moduleCall checks that a module block passes only the called module's
// variables, and every variable it requires (those without a default).
func (c *refChecker) moduleCall(name string, b *hclsyntax.Block) {
	if b.Body.Attributes["source"] == nil {
		c.add(b.DefRange(), "module %s has no source", name)
		return
	}
	child := c.child(b)
	if child == nil {
		return
	}
	for _, a := range attrs(b.Body) {
		if !moduleMeta[a.Name] && child.variables[a.Name] == nil {
			c.add(a.SrcRange, "module %s: the module has no variable %s", name, a.Name)
		}
	}
	for _, v := range keys(child.variables) {
		if child.variables[v].Body.Attributes["default"] == nil && b.Body.Attributes[v] == nil {
			c.add(b.DefRange(), "module %s: required variable %s is not set", name, v)
		}
	}
	for _, nb := range b.Body.Blocks {
		c.add(nb.DefRange(), "module %s: unexpected block %s", name, nb.Type)
	}
}
