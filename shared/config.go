package shared

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// DecodeConfig decodes a plugin's `config {}` block, as the host sends it
// in ConfigureRequest.Config (JSON; empty or null when the sandbox has no
// block), into cfg, a pointer to the backend's config struct holding its
// defaults. Attributes match the struct's json tags exactly; an attribute
// the struct does not have, or a value of the wrong type, is refused with
// ConfigError on that attribute ("pool.size" inside a nested block), so the
// host reports it at the attribute in the policy file.
func DecodeConfig(backend string, raw []byte, cfg any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	v := reflect.ValueOf(cfg)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("%s config: DecodeConfig wants a pointer to a struct, got %T: %w", backend, cfg, ErrInternal)
	}
	return decodeBlock(backend, v.Elem(), raw, "")
}

// ConfigError is a Configure refusal of the config attribute field (a
// dotted path for one in a nested block): a *FieldError, so the host
// points at the attribute in the policy and the error wraps
// ErrInvalidArgument, wrapping class as well when it is not nil (for
// example ErrUnavailable: the attribute names something this machine
// lacks). The message starts with "<backend> config:".
func ConfigError(backend, field string, class error, format string, a ...any) error {
	fe := &FieldError{Field: field, Reason: fmt.Sprintf(format, a...)}
	if class == nil {
		return fmt.Errorf("%s config: %w", backend, fe)
	}
	return fmt.Errorf("%s config: %w: %w", backend, fe, class)
}

// decodeBlock decodes the JSON object raw into the struct v attribute by
// attribute, path being the block's own path ("" at the top).
func decodeBlock(backend string, v reflect.Value, raw []byte, path string) error {
	var attrs map[string]json.RawMessage
	if err := json.Unmarshal(raw, &attrs); err != nil {
		if path == "" {
			return fmt.Errorf("%s config: want an object of attributes: %v: %w", backend, err, ErrInvalidArgument)
		}
		return ConfigError(backend, path, nil, "want a block of attributes")
	}
	fields := configFields(v.Type())
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		names = append(names, name)
	}
	slices.Sort(names) // the first refusal does not depend on map order
	for _, name := range names {
		at := name
		if path != "" {
			at = path + "." + name
		}
		idx, ok := fields[name]
		if !ok {
			known := make([]string, 0, len(fields))
			for k := range fields {
				known = append(known, k)
			}
			slices.Sort(known)
			return ConfigError(backend, at, nil, "unknown attribute %q; this block takes %s", name, strings.Join(known, ", "))
		}
		f := v.FieldByIndex(idx)
		if isBlock(f.Type()) {
			if string(bytes.TrimSpace(attrs[name])) == "null" {
				continue
			}
			if f.Kind() == reflect.Pointer {
				if f.IsNil() {
					f.Set(reflect.New(f.Type().Elem()))
				}
				f = f.Elem()
			}
			if err := decodeBlock(backend, f, attrs[name], at); err != nil {
				return err
			}
			continue
		}
		if err := json.Unmarshal(attrs[name], f.Addr().Interface()); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return ConfigError(backend, at, nil, "a %s value where %s is wanted", te.Value, typeName(te.Type))
			}
			return ConfigError(backend, at, nil, "%v", err)
		}
	}
	return nil
}

// configFields maps the attribute names of the struct type t (json tags,
// or the field name without one; "-" and unexported fields are none) to
// their field indexes.
func configFields(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name = n
			}
		}
		out[name] = f.Index
	}
	return out
}

// isBlock reports whether a field of type t is a nested block, decoded
// attribute by attribute: a struct, or a pointer to one, that does not
// decode itself.
func isBlock(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	p := reflect.PointerTo(t)
	return !p.Implements(reflect.TypeFor[json.Unmarshaler]()) && !p.Implements(reflect.TypeFor[encoding.TextUnmarshaler]())
}

// typeName is how a config value of type t is described to the operator.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map:
		return "a map"
	case reflect.Struct:
		return "a block"
	}
	return t.String()
}
