package terraform_test

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"gopkg.in/yaml.v3"
)

// An evaluator computes what Terraform would for the parts of a module
// that do not depend on AWS: variables (defaults, or the values given),
// locals, and the arguments of blocks, with the attributes of resources
// and data sources unknown unless given in known.
type evaluator struct {
	m      *module
	ctx    *hcl.EvalContext
	locals map[string]cty.Value
}

// newEvaluator evaluates m's variables and locals. vars overrides the
// variables' defaults (a variable without either is unknown); known gives
// values to reference roots such as "aws_dynamodb_table" or "path".
func newEvaluator(m *module, vars, known map[string]cty.Value) *evaluator {
	v := map[string]cty.Value{}
	for name, b := range m.variables {
		val := cty.DynamicVal
		if d, ok := b.Body.Attributes["default"]; ok {
			if dv, diags := d.Expr.Value(nil); !diags.HasErrors() {
				val = dv
			}
		}
		if o, ok := vars[name]; ok {
			val = o
		}
		v[name] = val
	}
	roots := map[string]map[string]cty.Value{}
	for key := range m.resources {
		typ, name, _ := strings.Cut(key, ".")
		if roots[typ] == nil {
			roots[typ] = map[string]cty.Value{}
		}
		roots[typ][name] = cty.DynamicVal
	}
	data := map[string]map[string]cty.Value{}
	for key := range m.data {
		typ, name, _ := strings.Cut(key, ".")
		if data[typ] == nil {
			data[typ] = map[string]cty.Value{}
		}
		data[typ][name] = cty.DynamicVal
	}
	e := &evaluator{m: m, locals: map[string]cty.Value{}}
	e.ctx = &hcl.EvalContext{Variables: map[string]cty.Value{"var": objectOf(v)}, Functions: functions()}
	for typ, names := range roots {
		e.ctx.Variables[typ] = objectOf(names)
	}
	dataTypes := map[string]cty.Value{}
	for typ, names := range data {
		dataTypes[typ] = objectOf(names)
	}
	e.ctx.Variables["data"] = objectOf(dataTypes)
	e.ctx.Variables["module"] = cty.DynamicVal
	e.ctx.Variables["path"] = cty.ObjectVal(map[string]cty.Value{
		"module": cty.StringVal(m.dir), "root": cty.StringVal(m.dir), "cwd": cty.StringVal("."),
	})
	for k, val := range known {
		e.ctx.Variables[k] = val
	}
	// Locals may use one another: evaluate them until nothing more can be.
	for name := range m.locals {
		e.locals[name] = cty.DynamicVal
	}
	for range len(m.locals) + 1 {
		e.ctx.Variables["local"] = objectOf(e.locals)
		progress := false
		for name, a := range m.locals {
			if e.locals[name].IsWhollyKnown() {
				continue
			}
			val, diags := a.Expr.Value(e.ctx)
			if !diags.HasErrors() && !val.RawEquals(e.locals[name]) {
				e.locals[name] = val
				progress = true
			}
		}
		if !progress {
			break
		}
	}
	e.ctx.Variables["local"] = objectOf(e.locals)
	return e
}

func objectOf(m map[string]cty.Value) cty.Value {
	if len(m) == 0 {
		return cty.EmptyObjectVal
	}
	return cty.ObjectVal(m)
}

// instance is a block to evaluate: its body, and the context (each,
// count, a dynamic block's iterator) to evaluate it in.
type instance struct {
	body *hclsyntax.Body
	ctx  *hcl.EvalContext
	at   hcl.Range
}

// instances returns the instances of the resource or data source block b:
// one per element of its for_each (each.key, each.value), per index of its
// count (count.index), or itself.
func (e *evaluator) instances(b *hclsyntax.Block) ([]instance, error) {
	if fe, ok := b.Body.Attributes["for_each"]; ok {
		v, diags := fe.Expr.Value(e.ctx)
		if diags.HasErrors() {
			return nil, diags
		}
		if !v.IsKnown() {
			return nil, fmt.Errorf("%s: for_each is not known", pos(fe.SrcRange))
		}
		var out []instance
		for it := v.ElementIterator(); it.Next(); {
			k, val := it.Element()
			ctx := e.ctx.NewChild()
			ctx.Variables = map[string]cty.Value{"each": cty.ObjectVal(map[string]cty.Value{"key": k, "value": val})}
			out = append(out, instance{body: b.Body, ctx: ctx, at: b.DefRange()})
		}
		return out, nil
	}
	if c, ok := b.Body.Attributes["count"]; ok {
		v, diags := c.Expr.Value(e.ctx)
		if diags.HasErrors() {
			return nil, diags
		}
		n, err := toInt(v)
		if err != nil {
			return nil, fmt.Errorf("%s: count: %w", pos(c.SrcRange), err)
		}
		var out []instance
		for i := range n {
			ctx := e.ctx.NewChild()
			ctx.Variables = map[string]cty.Value{"count": cty.ObjectVal(map[string]cty.Value{"index": cty.NumberIntVal(int64(i))})}
			out = append(out, instance{body: b.Body, ctx: ctx, at: b.DefRange()})
		}
		return out, nil
	}
	return []instance{{body: b.Body, ctx: e.ctx, at: b.DefRange()}}, nil
}

func toInt(v cty.Value) (int, error) {
	if !v.IsKnown() || v.IsNull() || v.Type() != cty.Number {
		return 0, fmt.Errorf("not a known number: %#v", v)
	}
	bf := v.AsBigFloat()
	n, acc := bf.Int64()
	if acc != 0 {
		return 0, fmt.Errorf("not a whole number: %s", bf)
	}
	return int(n), nil
}

// blocks returns the nested blocks of type typ of in: the static ones and
// the expansion of dynamic ones, each with its iterator in context.
func (in instance) blocks(typ string) ([]instance, error) {
	var out []instance
	for _, b := range in.body.Blocks {
		switch {
		case b.Type == typ:
			out = append(out, instance{body: b.Body, ctx: in.ctx, at: b.DefRange()})
		case b.Type == "dynamic" && len(b.Labels) == 1 && b.Labels[0] == typ:
			iter := typ
			if a, ok := b.Body.Attributes["iterator"]; ok {
				iter = hcl.ExprAsKeyword(a.Expr)
			}
			var content *hclsyntax.Body
			for _, c := range b.Body.Blocks {
				if c.Type == "content" {
					content = c.Body
				}
			}
			fe, ok := b.Body.Attributes["for_each"]
			if !ok || content == nil {
				return nil, fmt.Errorf("%s: dynamic %q without for_each or content", pos(b.DefRange()), typ)
			}
			v, diags := fe.Expr.Value(in.ctx)
			if diags.HasErrors() {
				return nil, diags
			}
			if !v.IsKnown() {
				return nil, fmt.Errorf("%s: dynamic %q: for_each is not known", pos(fe.SrcRange), typ)
			}
			for it := v.ElementIterator(); it.Next(); {
				k, val := it.Element()
				ctx := in.ctx.NewChild()
				ctx.Variables = map[string]cty.Value{iter: cty.ObjectVal(map[string]cty.Value{"key": k, "value": val})}
				out = append(out, instance{body: content, ctx: ctx, at: b.DefRange()})
			}
		}
	}
	return out, nil
}

// value evaluates the attribute name of in: cty.NilVal and no error when
// it is not set.
func (in instance) value(name string) (cty.Value, error) {
	a, ok := in.body.Attributes[name]
	if !ok {
		return cty.NilVal, nil
	}
	v, diags := a.Expr.Value(in.ctx)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	return v, nil
}

// str evaluates the attribute name of in as a known string ("" if unset).
func (in instance) str(name string) (string, error) {
	v, err := in.value(name)
	if err != nil || v == cty.NilVal {
		return "", err
	}
	if v.IsNull() {
		return "", nil
	}
	v, err = convert.Convert(v, cty.String)
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", pos(in.at), name, err)
	}
	if !v.IsKnown() {
		return "", fmt.Errorf("%s: %s is not known", pos(in.at), name)
	}
	return v.AsString(), nil
}

// strs evaluates the attribute name of in as a list of known strings.
func (in instance) strs(name string) ([]string, error) {
	v, err := in.value(name)
	if err != nil || v == cty.NilVal || v.IsNull() {
		return nil, err
	}
	v, err = convert.Convert(v, cty.List(cty.String))
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", pos(in.at), name, err)
	}
	if !v.IsWhollyKnown() {
		return nil, fmt.Errorf("%s: %s is not known", pos(in.at), name)
	}
	var out []string
	for _, s := range v.AsValueSlice() {
		out = append(out, s.AsString())
	}
	return out, nil
}

// functions are the Terraform functions the module's locals and the
// evaluated arguments use; a function missing here leaves what calls it
// unknown, which the tests that need the value report.
func functions() map[string]function.Function {
	unknownString := function.New(&function.Spec{
		Params: []function.Parameter{{Name: "path", Type: cty.String}},
		Type:   function.StaticReturnType(cty.String),
		Impl:   func([]cty.Value, cty.Type) (cty.Value, error) { return cty.UnknownVal(cty.String), nil },
	})
	return map[string]function.Function{
		"concat":     stdlib.ConcatFunc,
		"distinct":   stdlib.DistinctFunc,
		"flatten":    stdlib.FlattenFunc,
		"yamldecode": yamlDecode,
		"contains":   stdlib.ContainsFunc,
		"format":     stdlib.FormatFunc,
		"join":       stdlib.JoinFunc,
		"jsonencode": stdlib.JSONEncodeFunc,
		"keys":       stdlib.KeysFunc,
		"length":     stdlib.LengthFunc,
		"lookup":     stdlib.LookupFunc,
		"merge":      stdlib.MergeFunc,
		"values":     stdlib.ValuesFunc,
		"tostring": function.New(&function.Spec{
			Params: []function.Parameter{{Name: "v", Type: cty.DynamicPseudoType, AllowNull: true, AllowUnknown: true}},
			Type:   function.StaticReturnType(cty.String),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				return convert.Convert(args[0], cty.String)
			},
		}),
		"one": function.New(&function.Spec{
			Params: []function.Parameter{{Name: "list", Type: cty.DynamicPseudoType, AllowUnknown: true}},
			Type:   function.StaticReturnType(cty.DynamicPseudoType),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				l := args[0]
				if !l.IsKnown() {
					return cty.DynamicVal, nil
				}
				if !l.CanIterateElements() {
					return cty.NilVal, fmt.Errorf("one: not a collection")
				}
				switch n := l.LengthInt(); n {
				case 0:
					return cty.NullVal(cty.DynamicPseudoType), nil
				case 1:
					return l.AsValueSlice()[0], nil
				default:
					return cty.NilVal, fmt.Errorf("one: %d elements", n)
				}
			},
		}),
		"filebase64sha256": unknownString,
	}
}

// yamlDecode is Terraform's yamldecode for the documents the module
// decodes (the events rules file): YAML read as JSON values.
var yamlDecode = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "src", Type: cty.String}},
	Type: func(args []cty.Value) (cty.Type, error) {
		if !args[0].IsKnown() {
			return cty.DynamicPseudoType, nil
		}
		b, err := yamlToJSON(args[0].AsString())
		if err != nil {
			return cty.NilType, err
		}
		return ctyjson.ImpliedType(b)
	},
	Impl: func(args []cty.Value, ty cty.Type) (cty.Value, error) {
		b, err := yamlToJSON(args[0].AsString())
		if err != nil {
			return cty.NilVal, err
		}
		return ctyjson.Unmarshal(b, ty)
	},
})

func yamlToJSON(src string) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal([]byte(src), &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
