package host

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/orqest/sandbox/shared"
)

// SchemaSpec builds the hcldec spec of a plugin's config block from the
// schema it advertises in Info. Attribute types are HCL type expressions:
// "string", "number", "bool", "list(string)", "map(number)", ...; an
// attribute of type shared.ConfigBlock is a nested block (at most one) with
// its own attributes, as Nomad's driver plugins declare theirs.
func SchemaSpec(schema []shared.ConfigAttribute) (hcldec.ObjectSpec, error) {
	spec := hcldec.ObjectSpec{}
	for _, a := range schema {
		if !hclsyntax.ValidIdentifier(a.Name) {
			return nil, fmt.Errorf("config attribute %q is not a valid HCL identifier", a.Name)
		}
		if a.Type == shared.ConfigBlock {
			nested, err := SchemaSpec(a.Attributes)
			if err != nil {
				return nil, fmt.Errorf("config block %q: %v", a.Name, err)
			}
			spec[a.Name] = &hcldec.BlockSpec{TypeName: a.Name, Nested: nested, Required: a.Required}
			continue
		}
		if len(a.Attributes) > 0 {
			return nil, fmt.Errorf("config attribute %q has nested attributes but is not of type %q", a.Name, shared.ConfigBlock)
		}
		ty, err := parseType(a.Type)
		if err != nil {
			return nil, fmt.Errorf("config attribute %q: %v", a.Name, err)
		}
		spec[a.Name] = &hcldec.AttrSpec{Name: a.Name, Type: ty, Required: a.Required}
	}
	return spec, nil
}

func parseType(s string) (cty.Type, error) {
	expr, diags := hclsyntax.ParseExpression([]byte(s), "type", hcl.InitialPos)
	if diags.HasErrors() {
		return cty.NilType, fmt.Errorf("invalid type %q: %s", s, diags.Error())
	}
	ty, diags := typeexpr.Type(expr)
	if diags.HasErrors() {
		return cty.NilType, fmt.Errorf("invalid type %q: %s", s, diags.Error())
	}
	return ty, nil
}

// decodeBackendConfig decodes a sandbox's `config {}` block against the
// plugin's schema and returns it as a JSON object (nil when the block is
// absent and nothing is required). Unknown or mistyped attributes are
// diagnostics with the block's source ranges.
func decodeBackendConfig(sb *SandboxConfig, pluginName string, schema []shared.ConfigAttribute) (json.RawMessage, hcl.Diagnostics) {
	spec, err := SchemaSpec(schema)
	if err != nil {
		return nil, hcl.Diagnostics{errDiag(sb.PluginRange, "Plugin advertises an invalid config schema",
			fmt.Sprintf("Plugin %q: %v. This is a bug in the plugin.", pluginName, err))}
	}
	if sb.Config == nil {
		var diags hcl.Diagnostics
		for _, a := range schema {
			if a.Required {
				diags = append(diags, errDiag(sb.DefRange, "Missing config block",
					fmt.Sprintf("Plugin %q requires the attribute %q in the sandbox's config block: %s", pluginName, a.Name, a.Description)))
			}
		}
		return nil, diags
	}
	val, diags := hcldec.Decode(sb.Config.Body, spec, nil)
	if diags.HasErrors() {
		for _, d := range diags {
			if d.Summary == "Unsupported argument" || d.Summary == "Unsupported block type" {
				d.Detail += fmt.Sprintf(" Plugin %q accepts: %s.", pluginName, schemaNames(schema))
			}
		}
		return nil, diags
	}
	obj := dropNulls(val)
	b, err := ctyjson.Marshal(obj, obj.Type())
	if err != nil {
		return nil, hcl.Diagnostics{errDiag(sb.Config.DefRange, "Cannot encode config block", err.Error())}
	}
	return b, diags
}

// dropNulls removes unset (null) attributes, in nested blocks too, so that
// plugins see only what was written.
func dropNulls(val cty.Value) cty.Value {
	attrs := map[string]cty.Value{}
	for it := val.ElementIterator(); it.Next(); {
		k, v := it.Element()
		if v.IsNull() {
			continue
		}
		if v.Type().IsObjectType() {
			v = dropNulls(v)
		}
		attrs[k.AsString()] = v
	}
	if len(attrs) == 0 {
		return cty.EmptyObjectVal
	}
	return cty.ObjectVal(attrs)
}

func schemaNames(schema []shared.ConfigAttribute) string {
	if len(schema) == 0 {
		return "no attributes"
	}
	s := ""
	for i, a := range schema {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s (%s)", a.Name, a.Type)
	}
	return s
}

// configRange returns where a sandbox's config block writes field, a path
// of names ("image", "promotion.threshold": an attribute of a nested
// block); ok is false when the block does not write it (a default was at
// fault).
func configRange(sb *SandboxConfig, field string) (r hcl.Range, ok bool) {
	if sb.Config == nil {
		return r, false
	}
	body, isSyntax := sb.Config.Body.(*hclsyntax.Body)
	if !isSyntax {
		return r, false
	}
	parts := strings.Split(field, ".")
	for i, name := range parts {
		if i == len(parts)-1 {
			if a, found := body.Attributes[name]; found {
				return a.Expr.Range(), true
			}
		}
		var next *hclsyntax.Block
		for _, b := range body.Blocks {
			if b.Type == name {
				next = b
				break
			}
		}
		if next == nil {
			return r, false
		}
		if i == len(parts)-1 {
			return next.DefRange(), true
		}
		body = next.Body
	}
	return r, false
}
