package terraform_test

import (
	"fmt"

	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Meta-arguments every resource and data source block takes.
var metaArguments = map[string]bool{"count": true, "for_each": true, "depends_on": true, "provider": true}

var (
	conditionSchema = &blockSchema{Attributes: []string{"condition", "error_message"}, Required: []string{"condition", "error_message"}}
	lifecycleSchema = &blockSchema{
		Attributes: []string{"create_before_destroy", "prevent_destroy", "ignore_changes", "replace_triggered_by"},
		Blocks:     map[string]*blockSchema{"precondition": conditionSchema, "postcondition": conditionSchema},
	}
	variableSchema = &blockSchema{
		Attributes: []string{"description", "type", "default", "sensitive", "nullable", "ephemeral"},
		Blocks:     map[string]*blockSchema{"validation": conditionSchema},
	}
	outputSchema = &blockSchema{
		Attributes: []string{"value", "description", "sensitive", "depends_on", "ephemeral"},
		Required:   []string{"value"},
		Blocks:     map[string]*blockSchema{"precondition": conditionSchema},
	}
	// Top-level blocks other than those parseModule sorts out.
	otherTopLevel = map[string]bool{"terraform": true, "moved": true, "import": true, "check": true, "removed": true}
)

// schemaProblems checks every block of m against the pinned provider
// schema: resource and data source types, their arguments and nested
// blocks (dynamic ones included), required arguments, and that no
// computed attribute is set; and the structure of variables, outputs and
// provider blocks.
func schemaProblems(m *module, s *providerSchema) []string {
	var probs []string
	for _, key := range keys(m.resources) {
		b := m.resources[key]
		rs := s.Resources[b.Labels[0]]
		if rs == nil {
			probs = append(probs, fmt.Sprintf("%s: resource type %s is not in the pinned provider schema (testdata/aws_provider_schema.json)", pos(b.DefRange()), b.Labels[0]))
			continue
		}
		probs = checkBody(probs, b.Body, rs, "resource "+key, true)
	}
	for _, key := range keys(m.data) {
		b := m.data[key]
		ds := s.DataSources[b.Labels[0]]
		if ds == nil {
			probs = append(probs, fmt.Sprintf("%s: data source type %s is not in the pinned provider schema", pos(b.DefRange()), b.Labels[0]))
			continue
		}
		probs = checkBody(probs, b.Body, ds, "data "+key, true)
	}
	for _, b := range m.providers {
		if len(b.Labels) != 1 || b.Labels[0] != "aws" {
			probs = append(probs, fmt.Sprintf("%s: provider %v: only aws is pinned", pos(b.DefRange()), b.Labels))
			continue
		}
		probs = checkBody(probs, b.Body, s.ProviderBlock, "provider aws", false)
	}
	for _, name := range keys(m.variables) {
		probs = checkBody(probs, m.variables[name].Body, variableSchema, "variable "+name, false)
	}
	for _, name := range keys(m.outputs) {
		probs = checkBody(probs, m.outputs[name].Body, outputSchema, "output "+name, false)
	}
	for _, b := range m.others {
		if !otherTopLevel[b.Type] {
			probs = append(probs, fmt.Sprintf("%s: unknown top-level block %s", pos(b.DefRange()), b.Type))
		}
	}
	return probs
}

// checkBody checks body against s; top is true for a resource's or data
// source's own body, where meta-arguments and lifecycle are allowed.
func checkBody(probs []string, body *hclsyntax.Body, s *blockSchema, what string, top bool) []string {
	for _, a := range attrs(body) {
		switch {
		case top && metaArguments[a.Name]:
		case s.hasAttribute(a.Name):
		case s.exports(a.Name):
			probs = append(probs, fmt.Sprintf("%s: %s: %s is computed by the provider and cannot be set", pos(a.SrcRange), what, a.Name))
		default:
			probs = append(probs, fmt.Sprintf("%s: %s: unknown argument %q", pos(a.SrcRange), what, a.Name))
		}
	}
	if top && body.Attributes["count"] != nil && body.Attributes["for_each"] != nil {
		probs = append(probs, fmt.Sprintf("%s: %s: count and for_each together", pos(body.SrcRange), what))
	}
	for _, b := range body.Blocks {
		switch {
		case top && b.Type == "lifecycle":
			probs = checkBody(probs, b.Body, lifecycleSchema, what+" lifecycle", false)
		case b.Type == "dynamic":
			if len(b.Labels) != 1 || s.Blocks[b.Labels[0]] == nil {
				probs = append(probs, fmt.Sprintf("%s: %s: unknown block in dynamic %v", pos(b.DefRange()), what, b.Labels))
				continue
			}
			inner := what + " dynamic " + b.Labels[0]
			for _, a := range attrs(b.Body) {
				if a.Name != "for_each" && a.Name != "iterator" && a.Name != "labels" {
					probs = append(probs, fmt.Sprintf("%s: %s: unknown argument %q", pos(a.SrcRange), inner, a.Name))
				}
			}
			if b.Body.Attributes["for_each"] == nil {
				probs = append(probs, fmt.Sprintf("%s: %s: missing for_each", pos(b.DefRange()), inner))
			}
			contents := 0
			for _, c := range b.Body.Blocks {
				if c.Type != "content" {
					probs = append(probs, fmt.Sprintf("%s: %s: unknown block %s", pos(c.DefRange()), inner, c.Type))
					continue
				}
				contents++
				probs = checkBody(probs, c.Body, s.Blocks[b.Labels[0]], inner, false)
			}
			if contents != 1 {
				probs = append(probs, fmt.Sprintf("%s: %s: %d content blocks, want 1", pos(b.DefRange()), inner, contents))
			}
		case s.Blocks[b.Type] != nil:
			probs = checkBody(probs, b.Body, s.Blocks[b.Type], what+" "+b.Type, false)
		default:
			probs = append(probs, fmt.Sprintf("%s: %s: unknown block %q", pos(b.DefRange()), what, b.Type))
		}
	}
	for _, r := range s.Required {
		if body.Attributes[r] == nil {
			probs = append(probs, fmt.Sprintf("%s: %s: missing required argument %q", pos(body.SrcRange), what, r))
		}
	}
	return probs
}
