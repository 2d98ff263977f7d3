package host

import (
	"encoding/json"
	"fmt"

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
// "string", "number", "bool", "list(string)", "map(number)", ...
func SchemaSpec(schema []shared.ConfigAttribute) (hcldec.ObjectSpec, error) {
	spec := hcldec.ObjectSpec{}
	for _, a := range schema {
		if !hclsyntax.ValidIdentifier(a.Name) {
			return nil, fmt.Errorf("config attribute %q is not a valid HCL identifier", a.Name)
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
	// Drop unset (null) attributes so that plugins see only what was written.
	attrs := map[string]cty.Value{}
	for it := val.ElementIterator(); it.Next(); {
		k, v := it.Element()
		if !v.IsNull() {
			attrs[k.AsString()] = v
		}
	}
	obj := cty.EmptyObjectVal
	if len(attrs) > 0 {
		obj = cty.ObjectVal(attrs)
	}
	b, err := ctyjson.Marshal(obj, obj.Type())
	if err != nil {
		return nil, hcl.Diagnostics{errDiag(sb.Config.DefRange, "Cannot encode config block", err.Error())}
	}
	return b, diags
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
