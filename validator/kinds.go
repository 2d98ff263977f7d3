package validator

import ts "github.com/tree-sitter/go-tree-sitter"

// category is what the walker needs to know about a node kind. The table is
// built once from the grammar, so the walk compares small integers, not
// strings.
type category uint8

const (
	catOther category = iota
	catIdentifier
	catDottedName
	catAttribute
	catSubscript
	catString
	catConcatString
	catInterpolation
	catKeywordArgument
	catKeywordPattern
	catClassDef
	catImport
	catAliasedImport
	catImportFrom
	catFutureImport
	catRelativeImport
	catWildcardImport
	catError
	catPrintStatement
	catExecStatement
	catTooNew // syntax newer than the child's CPython (3.11)
	catTypeParameter
	catFunctionDef
	catBlock
	catInteger
	catParameters
	catArgumentList
	catDictionarySplat
	catDictionary
	catKeywordSeparator
	catDefaultParameter
	catDictSplatPattern
	catPositionalParam
	catListSplat
	catListSplatPattern
	catNamedExpression
	catExpressionStatement
	catAssignment
	catAugAssignment
	catDelete
	catFor
	catForIn
	catAsPatternTarget
	catTargetContainer // pattern_list, tuple_pattern, list_pattern, list_splat_pattern, tuple, list, parenthesized_expression, expression_list, list_splat
	catParenthesized
	catBinaryOperator
	catStringStart
	catStringContent
	catStringEnd
	catEscapeSequence
	catEscapeInterpolation
	catFormatSpecifier
	catFormatExpression
	catComment
	catLineContinuation
	catCall
	catClassPattern
)

type kindTable struct {
	cat   []category
	names []string // kind id -> kind name, for the ids below NodeKindCount

	fieldAttribute    uint16
	fieldObject       uint16
	fieldName         uint16
	fieldSuperclasses uint16
	fieldLeft         uint16
	fieldAlias        uint16
	fieldModule       uint16
	fieldSubscript    uint16
	fieldOperator     uint16
	fieldRight        uint16
	fieldFunction     uint16
	fieldArguments    uint16
	fieldValue        uint16
	fieldDefinition   uint16
}

// name returns a kind id's name (go-tree-sitter's Node.Kind).
func (k *kindTable) name(id uint16) string {
	if int(id) < len(k.names) {
		return k.names[id]
	}
	return language.NodeKindForId(id) // ERROR (65535) and the like
}

func buildKinds(l *ts.Language) *kindTable {
	names := map[string]category{
		"identifier":               catIdentifier,
		"dotted_name":              catDottedName,
		"attribute":                catAttribute,
		"subscript":                catSubscript,
		"string":                   catString,
		"concatenated_string":      catConcatString,
		"interpolation":            catInterpolation,
		"keyword_argument":         catKeywordArgument,
		"keyword_pattern":          catKeywordPattern,
		"class_pattern":            catClassPattern,
		"class_definition":         catClassDef,
		"import_statement":         catImport,
		"aliased_import":           catAliasedImport,
		"import_from_statement":    catImportFrom,
		"future_import_statement":  catFutureImport,
		"relative_import":          catRelativeImport,
		"wildcard_import":          catWildcardImport,
		"ERROR":                    catError,
		"print_statement":          catPrintStatement,
		"exec_statement":           catExecStatement,
		"type_alias_statement":     catTooNew,
		"type_parameter":           catTypeParameter,
		"function_definition":      catFunctionDef,
		"block":                    catBlock,
		"named_expression":         catNamedExpression,
		"expression_statement":     catExpressionStatement,
		"assignment":               catAssignment,
		"augmented_assignment":     catAugAssignment,
		"delete_statement":         catDelete,
		"for_statement":            catFor,
		"for_in_clause":            catForIn,
		"as_pattern_target":        catAsPatternTarget,
		"pattern_list":             catTargetContainer,
		"tuple_pattern":            catTargetContainer,
		"list_pattern":             catTargetContainer,
		"list_splat_pattern":       catListSplatPattern,
		"tuple":                    catTargetContainer,
		"list":                     catTargetContainer,
		"expression_list":          catTargetContainer,
		"list_splat":               catListSplat,
		"parenthesized_expression": catParenthesized,
		"binary_operator":          catBinaryOperator,
		"integer":                  catInteger,
		"parameters":               catParameters,
		"lambda_parameters":        catParameters,
		"argument_list":            catArgumentList,
		"dictionary_splat":         catDictionarySplat,
		"dictionary":               catDictionary,
		"keyword_separator":        catKeywordSeparator,
		"default_parameter":        catDefaultParameter,
		"typed_default_parameter":  catDefaultParameter,
		"dictionary_splat_pattern": catDictSplatPattern,
		"typed_parameter":          catPositionalParam,
		"string_start":             catStringStart,
		"string_content":           catStringContent,
		"string_end":               catStringEnd,
		"escape_sequence":          catEscapeSequence,
		"escape_interpolation":     catEscapeInterpolation,
		"format_specifier":         catFormatSpecifier,
		"format_expression":        catFormatExpression,
		"comment":                  catComment,
		"line_continuation":        catLineContinuation,
		"call":                     catCall,
	}
	n := l.NodeKindCount()
	k := &kindTable{cat: make([]category, 65536), names: make([]string, n)}
	for id := uint32(0); id < n; id++ {
		name := l.NodeKindForId(uint16(id))
		k.names[id] = name
		c, ok := names[name]
		if !ok {
			continue
		}
		// Named kinds only, except ERROR; anonymous tokens such as the
		// keyword "print" share names with named kinds.
		if !l.NodeKindIsNamed(uint16(id)) && name != "ERROR" {
			continue
		}
		k.cat[id] = c
	}
	k.cat[65535] = catError // ts_builtin_sym_error
	k.fieldAttribute = l.FieldIdForName("attribute")
	k.fieldObject = l.FieldIdForName("object")
	k.fieldName = l.FieldIdForName("name")
	k.fieldSuperclasses = l.FieldIdForName("superclasses")
	k.fieldLeft = l.FieldIdForName("left")
	k.fieldAlias = l.FieldIdForName("alias")
	k.fieldModule = l.FieldIdForName("module_name")
	k.fieldSubscript = l.FieldIdForName("subscript")
	k.fieldOperator = l.FieldIdForName("operator")
	k.fieldRight = l.FieldIdForName("right")
	k.fieldFunction = l.FieldIdForName("function")
	k.fieldArguments = l.FieldIdForName("arguments")
	k.fieldValue = l.FieldIdForName("value")
	k.fieldDefinition = l.FieldIdForName("definition")
	return k
}
