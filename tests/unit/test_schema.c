/*
 * tests/unit/test_schema.c: the broker's check of tools/call arguments
 * against a tool's inputSchema: real MCP servers' schemas, every keyword with
 * valid and invalid values and exact reasons, ECMA regex semantics, and the
 * refusals that keep hostile schemas and arguments from hanging the broker.
 */
#include "broker/schema.h"

#include "common/cleanup.h"

#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct schema_case {
    const char *schema;   /* JSON with ' for " (none of these need a literal ') */
    const char *instance; /* the same */
    const char *why;      /* NULL: valid; else the exact reason */
};

/* The schemas as @modelcontextprotocol/server-filesystem publishes them. */
#define READ_TEXT_FILE                                                                       \
    "{'type':'object','properties':{'path':{'type':'string'},"                               \
    "'tail':{'type':'number','description':'If provided, returns only the last N lines'},"   \
    "'head':{'type':'number','description':'If provided, returns only the first N lines'}}," \
    "'required':['path'],'additionalProperties':false,"                                      \
    "'$schema':'http://json-schema.org/draft-07/schema#'}"
#define EDIT_FILE                                                                      \
    "{'type':'object','properties':{'path':{'type':'string'},'edits':{'type':'array'," \
    "'items':{'type':'object','properties':{'oldText':{'type':'string',"               \
    "'description':'Text to search for - must match exactly'},"                        \
    "'newText':{'type':'string','description':'Text to replace with'}},"               \
    "'required':['oldText','newText'],'additionalProperties':false}},"                 \
    "'dryRun':{'type':'boolean','default':false,"                                      \
    "'description':'Preview changes using git-style diff format'}},"                   \
    "'required':['path','edits'],'additionalProperties':false,"                        \
    "'$schema':'http://json-schema.org/draft-07/schema#'}"
#define WRITE_FILE                                                                          \
    "{'type':'object','properties':{'path':{'type':'string'},'content':{'type':'string'}}," \
    "'required':['path','content'],'additionalProperties':false,"                           \
    "'$schema':'http://json-schema.org/draft-07/schema#'}"
/* And @modelcontextprotocol/server-everything. */
#define ECHO                                                                                       \
    "{'type':'object','properties':{'message':{'type':'string','description':'Message to echo'}}," \
    "'required':['message'],'additionalProperties':false,"                                         \
    "'$schema':'http://json-schema.org/draft-07/schema#'}"
#define ADD                                                                              \
    "{'type':'object','properties':{'a':{'type':'number','description':'First number'}," \
    "'b':{'type':'number','description':'Second number'}},'required':['a','b'],"         \
    "'additionalProperties':false,'$schema':'http://json-schema.org/draft-07/schema#'}"
/* What zod 4's toJSONSchema writes (2020-12). */
#define ZOD4                                                                                   \
    "{'$schema':'https://json-schema.org/draft/2020-12/schema','type':'object','properties':{" \
    "'limit':{'type':'integer','exclusiveMinimum':0,'maximum':9007199254740991},"              \
    "'sort':{'type':'string','enum':['asc','desc']},"                                          \
    "'tags':{'type':'array','items':{'type':'string','minLength':1}},"                         \
    "'since':{'anyOf':[{'type':'string','format':'date',"                                      \
    "'pattern':'^\\\\d{4}-\\\\d{2}-\\\\d{2}$'},{'type':'null'}]}},"                            \
    "'required':['limit'],'additionalProperties':false}"
/* zod-to-json-schema's default: a repeated schema is a $ref to its first path. */
#define ZOD_REF                                                                                    \
    "{'type':'object','properties':{'from':{'type':'object','properties':{'x':{'type':'string'}}," \
    "'required':['x']},'to':{'$ref':'#/properties/from'}}}"
#define TREE                                                   \
    "{'type':'object','properties':{'name':{'type':'string'}," \
    "'children':{'type':'array','items':{'$ref':'#'}}},'required':['name']}"
#define IF_THEN_ELSE                                                               \
    "{'if':{'properties':{'kind':{'const':'file'}}},'then':{'required':['path']}," \
    "'else':{'required':['url']}}"

static const struct schema_case cases[] = {
    /* Real servers. */
    { READ_TEXT_FILE, "{'path':'/tmp/a'}", NULL },
    { READ_TEXT_FILE, "{'path':'/tmp/a','head':10,'tail':2.5}", NULL },
    { READ_TEXT_FILE, "{'path':42}", "arguments.path: expected a string, got number" },
    { READ_TEXT_FILE, "{}", "arguments.path: missing required property" },
    { READ_TEXT_FILE, "{'path':'/a','tail':'5'}", "arguments.tail: expected a number, got string" },
    { READ_TEXT_FILE, "{'path':'/a','mode':'x'}", "arguments: unexpected property \"mode\"" },
    { READ_TEXT_FILE, "[]", "arguments: expected an object, got array" },
    { EDIT_FILE, "{'path':'/a','edits':[{'oldText':'a','newText':'b'}]}", NULL },
    { EDIT_FILE, "{'path':'/a','edits':[],'dryRun':true}", NULL },
    { EDIT_FILE, "{'path':'/a','edits':[],'dryRun':'yes'}",
      "arguments.dryRun: expected a boolean, got string" },
    { EDIT_FILE,
      "{'path':'/a','edits':[{'oldText':'a','newText':'b'},{'oldText':'c','newText':'d'},"
      "{'newText':'e'}]}",
      "arguments.edits[2].oldText: missing required property" },
    { EDIT_FILE, "{'path':'/a','edits':{'oldText':'a','newText':'b'}}",
      "arguments.edits: expected an array, got object" },
    { EDIT_FILE, "{'path':'/a','edits':[{'oldText':'a','newText':'b','old':1}]}",
      "arguments.edits[0]: unexpected property \"old\"" },
    { EDIT_FILE, "{'path':'/a'}", "arguments.edits: missing required property" },
    { WRITE_FILE, "{'path':'/a','content':''}", NULL },
    { WRITE_FILE, "{'path':'/a'}", "arguments.content: missing required property" },
    { WRITE_FILE, "{'path':'/a','content':null}",
      "arguments.content: expected a string, got null" },
    { ECHO, "{'message':'hello'}", NULL },
    { ECHO, "{'message':5}", "arguments.message: expected a string, got number" },
    { ADD, "{'a':1,'b':2.5}", NULL },
    { ADD, "{'a':'1','b':2}", "arguments.a: expected a number, got string" },
    { ADD, "{'a':1}", "arguments.b: missing required property" },
    { ZOD4, "{'limit':10,'sort':'asc','tags':['x'],'since':'2024-01-31'}", NULL },
    { ZOD4, "{'limit':10,'since':null}", NULL },
    { ZOD4, "{'limit':0}", "arguments.limit: expected more than 0, got 0" },
    { ZOD4, "{'limit':1.5}", "arguments.limit: expected an integer, got 1.5" },
    { ZOD4, "{'limit':1,'sort':'up'}", "arguments.sort: expected one of \"asc\", \"desc\"" },
    { ZOD4, "{'limit':1,'tags':['a','']}",
      "arguments.tags[1]: expected at least 1 character, got 0" },
    { ZOD4, "{'limit':1,'since':'yesterday'}",
      "arguments.since: does not match any of the 2 schemas in anyOf" },
    { ZOD_REF, "{'from':{'x':'a'},'to':{'x':'b'}}", NULL },
    { ZOD_REF, "{'to':{'x':1}}", "arguments.to.x: expected a string, got number" },

    /* type */
    { "{'type':'string'}", "'x'", NULL },
    { "{'type':'string'}", "5", "arguments: expected a string, got number" },
    { "{'type':'integer'}", "3", NULL },
    { "{'type':'integer'}", "3.0", NULL },
    { "{'type':'integer'}", "1e300", NULL },
    { "{'type':'integer'}", "3.5", "arguments: expected an integer, got 3.5" },
    { "{'type':'integer'}", "'3'", "arguments: expected an integer, got string" },
    { "{'type':'number'}", "3", NULL },
    { "{'type':'number'}", "'3'", "arguments: expected a number, got string" },
    { "{'type':'boolean'}", "false", NULL },
    { "{'type':'boolean'}", "'true'", "arguments: expected a boolean, got string" },
    { "{'type':'null'}", "null", NULL },
    { "{'type':'object'}", "[]", "arguments: expected an object, got array" },
    { "{'type':'array'}", "{}", "arguments: expected an array, got object" },
    { "{'type':['string','null']}", "null", NULL },
    { "{'type':['string','null']}", "1", "arguments: expected a string or null, got number" },
    { "{'type':['boolean','string','number']}", "{}",
      "arguments: expected a string, a number or a boolean, got object" },
    { "{'type':'any'}", "1", "arguments: invalid schema: unknown type \"any\"" },
    { "{'type':[]}", "1", "arguments: invalid schema: 'type' is an empty array" },
    { "{'type':'string','nullable':true}", "null", NULL },
    { "{'type':'string','nullable':false}", "null", "arguments: expected a string, got null" },

    /* enum, const: deep equality, 1 == 1.0 */
    { "{'enum':['read','write']}", "'read'", NULL },
    { "{'enum':['read','write']}", "'exec'", "arguments: expected one of \"read\", \"write\"" },
    { "{'enum':[1,2]}", "1.0", NULL },
    { "{'enum':[{'a':[1,2]}]}", "{'a':[1.0,2]}", NULL },
    { "{'enum':[{'a':[1,2]}]}", "{'a':[2,1]}", "arguments: expected one of {\"a\":[1,2]}" },
    { "{'enum':[null]}", "0", "arguments: expected one of null" },
    { "{'enum':'a'}", "'a'", "arguments: invalid schema: 'enum' must be an array" },
    { "{'const':'x'}", "'x'", NULL },
    { "{'const':1}", "1.0", NULL },
    { "{'const':{'a':1,'b':[true]}}", "{'b':[true],'a':1}", NULL },
    { "{'const':{'a':1}}", "{'a':1,'b':2}", "arguments: expected {\"a\":1}" },
    { "{'const':false}", "0", "arguments: expected false" },
    { "{'const':null}", "false", "arguments: expected null" },
    { "{'const':'\xc3\xa9'}", "'e'", "arguments: expected \"\\u00E9\"" },

    /* minLength/maxLength count code points */
    { "{'minLength':5,'maxLength':5}", "'h\xc3\xa9llo'", NULL },
    { "{'maxLength':4}", "'h\xc3\xa9llo'", "arguments: expected at most 4 characters, got 5" },
    { "{'maxLength':1}", "'\xf0\x9f\x98\x80'", NULL },
    { "{'minLength':2}", "'\xf0\x9f\x98\x80'", "arguments: expected at least 2 characters, got 1" },
    { "{'minLength':1}", "''", "arguments: expected at least 1 character, got 0" },
    { "{'minLength':2.0}", "'ab'", NULL },
    { "{'minLength':5}", "12345", NULL },
    { "{'minLength':-1}", "''",
      "arguments: invalid schema: 'minLength' must be a non-negative integer" },
    { "{'maxLength':'3'}", "''",
      "arguments: invalid schema: 'maxLength' must be a non-negative integer" },

    /* pattern: ECMA 262 semantics, unanchored */
    { "{'pattern':'^[a-z]+$'}", "'abc'", NULL },
    { "{'pattern':'^[a-z]+$'}", "'abC'", "arguments: does not match pattern \"^[a-z]+$\"" },
    { "{'pattern':'b'}", "'abc'", NULL },
    { "{'pattern':'^a$'}", "'a\\n'", "arguments: does not match pattern \"^a$\"" },
    { "{'pattern':'^\\\\d+$'}", "'123'", NULL },
    { "{'pattern':'^\\\\d+$'}", "'\xd9\xa1\xd9\xa2'",
      "arguments: does not match pattern \"^\\\\d+$\"" },
    { "{'pattern':'^\\\\D$'}", "'\xd9\xa1'", NULL },
    { "{'pattern':'^\\\\w+$'}", "'h\xc3\xa9llo'",
      "arguments: does not match pattern \"^\\\\w+$\"" },
    { "{'pattern':'^\\\\W$'}", "'\xc3\xa9'", NULL },
    { "{'pattern':'^\\\\s$'}", "'\xc2\xa0'", NULL },
    { "{'pattern':'^\\\\s$'}", "'\\ufeff'", NULL },
    { "{'pattern':'^\\\\s$'}", "'\xc2\x85'", "arguments: does not match pattern \"^\\\\s$\"" },
    { "{'pattern':'^\\\\S+$'}", "'a\xc2\xa0'", "arguments: does not match pattern \"^\\\\S+$\"" },
    { "{'pattern':'^[\\\\S]+$'}", "'\xf0\x9f\x98\x80\xc2\x85'", NULL },
    { "{'pattern':'^[^\\\\s@]+@[^\\\\s@]+$'}", "'a@b'", NULL },
    { "{'pattern':'^[^\\\\s@]+@[^\\\\s@]+$'}", "'a b@c'",
      "arguments: does not match pattern \"^[^\\\\s@]+@[^\\\\s@]+$\"" },
    { "{'pattern':'^.$'}", "'\xc3\xa9'", NULL },
    { "{'pattern':'^.$'}", "'\xf0\x9f\x98\x80'", NULL },
    { "{'pattern':'^.$'}", "'\\u2028'", "arguments: does not match pattern \"^.$\"" },
    { "{'pattern':'^.$'}", "'\\u000b'", NULL },
    { "{'pattern':'^[\\\\w.-]+$'}", "'my-file.txt'", NULL },
    { "{'pattern':'^[\\\\w.-]+$'}", "'a b'", "arguments: does not match pattern \"^[\\\\w.-]+$\"" },
    /* A '-' beside a class escape is a literal (Annex B), never a range. */
    { "{'pattern':'^[.-\\\\d]+$'}", "'-.5'", NULL },
    { "{'pattern':'^[.-\\\\d]+$'}", "'/'", "arguments: does not match pattern \"^[.-\\\\d]+$\"" },
    { "{'pattern':'^[\\\\d-z]+$'}", "'5-z'", NULL },
    { "{'pattern':'^[\\\\d-z]+$'}", "'a'", "arguments: does not match pattern \"^[\\\\d-z]+$\"" },
    { "{'pattern':'^[a-c-e]+$'}", "'-e'", NULL },
    { "{'pattern':'^[a-c-e]+$'}", "'d'", "arguments: does not match pattern \"^[a-c-e]+$\"" },
    /* ECMA has no POSIX classes: "[[:alpha:]]" is a class then a ']'. */
    { "{'pattern':'^[[:alpha:]]$'}", "'a]'", NULL },
    { "{'pattern':'^[[:alpha:]]$'}", "'a'", "arguments: does not match pattern \"^[[:alpha:]]$\"" },
    { "{'pattern':'^[^]$'}", "'\\n'", NULL },
    { "{'pattern':'[]'}", "'x'", "arguments: does not match pattern \"[]\"" },
    { "{'pattern':'\\\\bfoo\\\\b'}", "'\xc3\xa9\x66oo'", NULL },
    { "{'pattern':'^\\\\u0041\\\\x42$'}", "'AB'", NULL },
    { "{'pattern':'^\\\\p{L}+$'}", "'h\xc3\xa9llo'", NULL },
    { "{'pattern':'^\\\\v$'}", "'\\u000b'", NULL },
    { "{'pattern':'^\\\\v$'}", "'\\n'", "arguments: does not match pattern \"^\\\\v$\"" },
    { "{'pattern':'^[\\\\h]$'}", "'h'",
      "arguments: cannot check pattern \"^[\\\\h]$\": \\h is no ECMA 262 escape" },
    { "{'pattern':'^\\\\p{L}+$'}", "'h3'", "arguments: does not match pattern \"^\\\\p{L}+$\"" },
    { "{'pattern':'^\\\\p{Extended_Pictographic}$'}", "'\xf0\x9f\x98\x80'", NULL },
    { "{'pattern':'^\\\\u{1F600}$'}", "'\xf0\x9f\x98\x80'", NULL },
    { "{'pattern':'^(a)?\\\\1b$'}", "'b'", NULL },
    { "{'pattern':'('}", "'x'",
      "arguments: cannot check pattern \"(\": missing closing parenthesis" },
    { "{'pattern':'(?<=a+)b'}", "'ab'",
      "arguments: cannot check pattern \"(?<=a+)b\": lookbehind assertion is not fixed length" },
    { "{'pattern':5}", "'x'", "arguments: invalid schema: 'pattern' must be a string" },
    { "{'pattern':'^x$'}", "5", NULL },

    /* numbers */
    { "{'minimum':1}", "1", NULL },
    { "{'minimum':1}", "0", "arguments: expected at least 1, got 0" },
    { "{'maximum':10}", "10.5", "arguments: expected at most 10, got 10.5" },
    { "{'exclusiveMinimum':0}", "0.001", NULL },
    { "{'exclusiveMinimum':0}", "0", "arguments: expected more than 0, got 0" },
    { "{'exclusiveMaximum':10}", "10", "arguments: expected less than 10, got 10" },
    { "{'minimum':0,'exclusiveMinimum':true}", "0", "arguments: expected more than 0, got 0" },
    { "{'minimum':0,'exclusiveMinimum':false}", "0", NULL },
    { "{'maximum':5,'exclusiveMaximum':true}", "4.99", NULL },
    { "{'maximum':5,'exclusiveMaximum':true}", "5.0", "arguments: expected less than 5, got 5" },
    { "{'maximum':9007199254740992}", "9007199254740993",
      "arguments: expected at most 9007199254740992, got 9007199254740993" },
    { "{'maximum':9007199254740992.0}", "9007199254740993",
      "arguments: expected at most 9007199254740992, got 9007199254740993" },
    { "{'minimum':-1.5}", "-2", "arguments: expected at least -1.5, got -2" },
    { "{'multipleOf':5}", "15", NULL },
    { "{'multipleOf':5}", "7", "arguments: expected a multiple of 5, got 7" },
    { "{'multipleOf':5}", "15.0", NULL },
    { "{'multipleOf':1}", "1.0000000001", "arguments: expected a multiple of 1, got 1.0000000001" },
    { "{'multipleOf':0.5}", "-2.5", NULL },
    { "{'multipleOf':1e-9}", "0.000000003", NULL },
    { "{'multipleOf':0.01}", "19.99", NULL },
    { "{'multipleOf':0.1}", "0.3", NULL },
    { "{'multipleOf':0.01}", "0.015", "arguments: expected a multiple of 0.01, got 0.015" },
    { "{'multipleOf':0}", "1", "arguments: invalid schema: 'multipleOf' must be more than 0" },
    { "{'minimum':'1'}", "1", "arguments: invalid schema: 'minimum' must be a number" },
    { "{'minimum':1}", "'0'", NULL },

    /* arrays */
    { "{'items':{'type':'string'}}", "['a','b']", NULL },
    { "{'items':{'type':'string'}}", "['a',1]", "arguments[1]: expected a string, got number" },
    { "{'items':[{'type':'string'},{'type':'number'}],'additionalItems':false}", "['a',1]", NULL },
    { "{'items':[{'type':'string'},{'type':'number'}],'additionalItems':false}", "['a',1,2]",
      "arguments: expected at most 2 items, got 3" },
    { "{'items':[{'type':'string'}],'additionalItems':{'type':'number'}}", "['a',1,'b']",
      "arguments[2]: expected a number, got string" },
    { "{'items':{'type':'string'},'additionalItems':false}", "['a','b']", NULL },
    { "{'prefixItems':[{'type':'string'}],'items':{'type':'number'}}", "['a',1,2]", NULL },
    { "{'prefixItems':[{'type':'string'}],'items':{'type':'number'}}", "['a','b']",
      "arguments[1]: expected a number, got string" },
    { "{'prefixItems':[{'type':'string'}],'items':false}", "['a','b']",
      "arguments: expected at most 1 item, got 2" },
    { "{'minItems':1}", "[]", "arguments: expected at least 1 item, got 0" },
    { "{'maxItems':2}", "[1,2,3]", "arguments: expected at most 2 items, got 3" },
    { "{'uniqueItems':true}", "[1,'1',true,null,[1],{'1':1},false,0]", NULL },
    { "{'uniqueItems':true}", "[1,2,1.0]", "arguments: items 0 and 2 are equal" },
    { "{'uniqueItems':true}", "[{'a':1,'b':[2]},{'b':[2.0],'a':1}]",
      "arguments: items 0 and 1 are equal" },
    { "{'uniqueItems':false}", "[1,1]", NULL },
    { "{'contains':{'type':'string'}}", "[1,'a']", NULL },
    { "{'contains':{'type':'string'}}", "[1,2]",
      "arguments: expected at least 1 item matching 'contains', got 0" },
    { "{'contains':{'type':'string'},'maxContains':1}", "['a','b']",
      "arguments: expected at most 1 item matching 'contains', got 2" },
    { "{'contains':{'type':'string'},'minContains':0}", "[1]", NULL },

    /* objects */
    { "{'required':['a']}", "{}", "arguments.a: missing required property" },
    { "{'required':['a']}", "'not an object'", NULL },
    { "{'additionalProperties':{'type':'number'}}", "{'x':1,'y':'2'}",
      "arguments.y: expected a number, got string" },
    { "{'patternProperties':{'^x-':{'type':'string'}},'additionalProperties':false}", "{'x-a':'1'}",
      NULL },
    { "{'patternProperties':{'^x-':{'type':'string'}},'additionalProperties':false}", "{'x-a':1}",
      "arguments[\"x-a\"]: expected a string, got number" },
    { "{'patternProperties':{'^x-':{'type':'string'}},'additionalProperties':false}", "{'y':1}",
      "arguments: unexpected property \"y\"" },
    { "{'properties':{'a':{'type':'string'}},'patternProperties':{'a':{'minLength':2}}}",
      "{'a':'x'}", "arguments.a: expected at least 2 characters, got 1" },
    { "{'properties':{'a b':{'type':'string'}}}", "{'a b':1}",
      "arguments[\"a b\"]: expected a string, got number" },
    { "{'required':['a\\nb\\\"']}", "{}", "arguments[\"a\\x0ab\\\"\"]: missing required property" },
    { "{'additionalProperties':false}", "{'\\u001b[2J':1}",
      "arguments: unexpected property \"\\x1b[2J\"" },
    { "{'minProperties':1}", "{}", "arguments: expected at least 1 property, got 0" },
    { "{'maxProperties':1}", "{'a':1,'b':2}", "arguments: expected at most 1 property, got 2" },
    { "{'propertyNames':{'pattern':'^[a-z]+$'}}", "{'abc':1,'Abc':2}",
      "arguments: property name \"Abc\": does not match pattern \"^[a-z]+$\"" },
    { "{'propertyNames':{'maxLength':3}}", "{'abcd':1}",
      "arguments: property name \"abcd\": expected at most 3 characters, got 4" },
    { "{'dependentRequired':{'a':['b']}}", "{'b':1}", NULL },
    { "{'dependentRequired':{'a':['b']}}", "{'a':1}",
      "arguments.b: missing property required when \"a\" is present" },
    { "{'dependencies':{'a':['b']}}", "{'a':1}",
      "arguments.b: missing property required when \"a\" is present" },
    { "{'dependencies':{'a':{'required':['c']}}}", "{'a':1}",
      "arguments.c: missing required property" },
    { "{'dependentSchemas':{'a':{'properties':{'b':{'type':'string'}}}}}", "{'a':1,'b':2}",
      "arguments.b: expected a string, got number" },
    { "{'required':'a'}", "{}",
      "arguments: invalid schema: 'required' must be an array of strings" },
    { "{'required':true}", "{}",
      "arguments: invalid schema: 'required' must be an array of strings" },
    { "{'properties':[]}", "{}", "arguments: invalid schema: 'properties' must be an object" },
    { "{'properties':{'a':false}}", "{'a':1}", "arguments.a: not allowed by the schema" },

    /* combinators */
    { "{'anyOf':[{'type':'string'},{'type':'number'}]}", "1", NULL },
    { "{'anyOf':[{'type':'string'},{'type':'number'}]}", "true",
      "arguments: does not match any of the 2 schemas in anyOf" },
    { "{'oneOf':[{'type':'number'},{'type':'integer'}]}", "1.5", NULL },
    { "{'oneOf':[{'type':'number'},{'type':'integer'}]}", "1",
      "arguments: matches more than one schema in oneOf (0 and 1)" },
    { "{'oneOf':[{'type':'number'},{'type':'integer'}]}", "'x'",
      "arguments: does not match any of the 2 schemas in oneOf" },
    { "{'allOf':[{'type':'string'},{'minLength':2}]}", "'ab'", NULL },
    { "{'allOf':[{'type':'string'},{'minLength':2}]}", "'a'",
      "arguments: expected at least 2 characters, got 1" },
    { "{'allOf':[]}", "1", "arguments: invalid schema: 'allOf' must not be empty" },
    { "{'not':{'type':'null'}}", "1", NULL },
    { "{'not':{'type':'null'}}", "null", "arguments: matches the schema in 'not'" },
    { IF_THEN_ELSE, "{'kind':'file','path':'/a'}", NULL },
    { IF_THEN_ELSE, "{'kind':'file'}", "arguments.path: missing required property" },
    { IF_THEN_ELSE, "{'kind':'web'}", "arguments.url: missing required property" },
    { "{'then':{'type':'string'}}", "1", NULL },
    /* What cannot be checked decides unless another branch settles it. */
    { "{'anyOf':[{'minLength':'x'},{'type':'string'}]}", "'abc'", NULL },
    { "{'anyOf':[{'type':'string','pattern':'('},{'type':'number'}]}", "'x'",
      "arguments: cannot check pattern \"(\": missing closing parenthesis" },
    { "{'oneOf':[{'type':'string'},{'pattern':'('}]}", "'x'",
      "arguments: cannot check pattern \"(\": missing closing parenthesis" },
    { "{'not':{'pattern':'('}}", "'x'",
      "arguments: cannot check pattern \"(\": missing closing parenthesis" },
    { "{'if':{'pattern':'('},'then':true}", "'x'",
      "arguments: cannot check pattern \"(\": missing closing parenthesis" },

    /* $ref: local JSON pointers */
    { "{'definitions':{'s':{'type':'string'}},'properties':{'a':{'$ref':'#/definitions/s'}}}",
      "{'a':1}", "arguments.a: expected a string, got number" },
    { "{'$defs':{'s':{'type':'string'}},'properties':{'a':{'$ref':'#/$defs/s'}}}", "{'a':'x'}",
      NULL },
    { "{'$defs':{'a/b':{'type':'string'}},'$ref':'#/$defs/a~1b'}", "1",
      "arguments: expected a string, got number" },
    { "{'$defs':{'a~b':{'type':'string'}},'$ref':'#/$defs/a~0b'}", "1",
      "arguments: expected a string, got number" },
    { "{'$defs':{'a b':{'type':'string'}},'$ref':'#/$defs/a%20b'}", "1",
      "arguments: expected a string, got number" },
    { "{'anyOf':[{'type':'string'},{'type':'object'}],'properties':{'a':{'$ref':'#/anyOf/0'}}}",
      "{'a':1}", "arguments.a: expected a string, got number" },
    { "{'$defs':{'s':{'type':'string'}},'$ref':'#/$defs/s','maxLength':2}", "'abc'",
      "arguments: expected at most 2 characters, got 3" },
    { TREE, "{'name':'a','children':[{'name':'b','children':[]}]}", NULL },
    { TREE, "{'name':'a','children':[{'children':[]}]}",
      "arguments.children[0].name: missing required property" },
    { "{'$ref':'#/definitions/nope'}", "1",
      "arguments: cannot resolve $ref \"#/definitions/nope\"" },
    { "{'$ref':'#/anyOf/01','anyOf':[true,true]}", "1",
      "arguments: cannot resolve $ref \"#/anyOf/01\"" },
    { "{'$ref':'#/$defs/a~2'}", "1", "arguments: cannot resolve $ref \"#/$defs/a~2\"" },
    { "{'$ref':'other.json#/a'}", "1", "arguments: cannot resolve $ref \"other.json#/a\"" },
    { "{'$ref':'#foo','$defs':{'f':{'$anchor':'foo'}}}", "1",
      "arguments: cannot resolve $ref \"#foo\"" },
    { "{'$ref':5}", "1", "arguments: invalid schema: '$ref' must be a string" },
    /* Under a subschema with its own $id, "#" is that document: not resolved. */
    { "{'properties':{'a':{'$id':'http://x.test/a.json','$ref':'#/definitions/s',"
      "'definitions':{'s':{'type':'string'}}}}}",
      "{'a':'x'}", "arguments.a: cannot resolve $ref \"#/definitions/s\"" },
    { "{'$defs':{'a':{'$id':'http://x.test/a.json','type':'string'}},'$ref':'#/$defs/a'}", "'x'",
      "arguments: cannot resolve $ref \"#/$defs/a\"" },
    { "{'$id':'http://x.test/root.json','$defs':{'s':{'$id':'#s','type':'string'}},"
      "'$ref':'#/$defs/s'}",
      "'x'", NULL },
    { "{'$ref':'#'}", "1", "arguments: schema nesting deeper than 64 levels (or a $ref cycle)" },
    { "{'$defs':{'a':{'$ref':'#/$defs/b'},'b':{'$ref':'#/$defs/a'}},'$ref':'#/$defs/a'}", "1",
      "arguments: schema nesting deeper than 64 levels (or a $ref cycle)" },

    /* boolean and malformed schemas */
    { "true", "{'anything':[1,2]}", NULL },
    { "false", "1", "arguments: not allowed by the schema" },
    { "{}", "null", NULL },
    { "'string'", "1", "arguments: invalid schema: expected an object or a boolean, got string" },
    { "{'items':5}", "[1]",
      "arguments[0]: invalid schema: expected an object or a boolean, got number" },

    /* keywords it does not check refuse; unknown ones are annotations */
    { "{'unevaluatedProperties':false}", "{}",
      "arguments: schema keyword 'unevaluatedProperties' is not supported by the broker" },
    { "{'unevaluatedProperties':true}", "{}", NULL },
    { "{'$dynamicRef':'#node'}", "{}",
      "arguments: schema keyword '$dynamicRef' is not supported by the broker" },
    { "{'properties':{'a':{'unevaluatedItems':false}}}", "{'b':1}", NULL },
    { "{'properties':{'a':{'unevaluatedItems':false}}}", "{'a':[]}",
      "arguments.a: schema keyword 'unevaluatedItems' is not supported by the broker" },
    { "{'title':'t','description':'d','default':1,'examples':[1],'$schema':'x','$id':'y',"
      "'$comment':'c','readOnly':true,'writeOnly':false,'deprecated':true,'format':'email',"
      "'contentMediaType':'text/plain','x-vendor':{'minLength':9},'type':'string'}",
      "'not an email'", NULL },
};

/* The tables write JSON with ' for ": turn it back. */
static json_t *load(const char *text)
{
    _cleanup_free_ char *s = strdup(text);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t e;
    json_t *j = json_loads(s, JSON_DECODE_ANY, &e);
    if (!j)
        printf("# cannot load %s: %s\n", text, e.text);
    return j;
}

static void test_cases(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct schema_case *c = &cases[i];
        _cleanup_(json_decrefp) json_t *schema = load(c->schema);
        _cleanup_(json_decrefp) json_t *inst = load(c->instance);
        char why[300] = "";
        int r = schema_check(schema, inst, "arguments", why, sizeof why);
        if (!c->why) {
            if (!ok(r == 0, "%s valid for %s", tap_show(c->instance), tap_show(c->schema)))
                printf("#   why: %s\n", why);
            continue;
        }
        ok(r == -1, "%s refused by %s", tap_show(c->instance), tap_show(c->schema));
        is_str(why, c->why, "  reason");
    }
}

/* A check against SCHEMA and INST (as JSON with '), with its reason in WHY. */
static int check(const char *schema, const char *inst, char *why, size_t len)
{
    _cleanup_(json_decrefp) json_t *s = load(schema);
    _cleanup_(json_decrefp) json_t *v = load(inst);
    return schema_check(s, v, "arguments", why, len);
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static void test_redos(void)
{
    char why[300] = "";
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int r = check("{'properties':{'s':{'pattern':'(a+)+$'}}}",
                  "{'s':'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!'}", why, sizeof why);
    double took = seconds_since(&t0);
    ok(r == -1, "catastrophic backtracking refused");
    is_str(why, "arguments.s: cannot check pattern \"(a+)+$\": matching hit its backtracking limit",
           "  reason");
    /* Generous for sanitizer builds; without limits this takes hours. */
    ok(took < 2.0, "  and quickly (%.3f s)", took);

    /* The same pattern on a benign subject still answers. */
    ok(check("{'pattern':'(a+)+$'}", "'aaaa'", why, sizeof why) == 0, "  benign subject matches");
}

/* anyOf of two $refs to the next level, 40 deep: 2^40 visits without a budget. */
static void test_fanout(void)
{
    char schema[8192], why[300] = "";
    size_t o = (size_t)snprintf(schema, sizeof schema, "{'$ref':'#/$defs/d0','$defs':{");
    for (int i = 0; i < 40; i++)
        o += (size_t)snprintf(schema + o, sizeof schema - o,
                              "'d%d':{'anyOf':[{'$ref':'#/$defs/d%d'},{'$ref':'#/$defs/d%d'}]},", i,
                              i + 1, i + 1);
    snprintf(schema + o, sizeof schema - o, "'d40':false}}");
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int r = check(schema, "1", why, sizeof why);
    double took = seconds_since(&t0);
    ok(r == -1, "exponential anyOf fan-out refused");
    is_str(why, "arguments: schema too costly to check (over 2000000 steps)", "  reason");
    ok(took < 5.0, "  and in bounded time (%.3f s)", took);
}

/* A schema's own long lists count against the budget too. */
static void test_long_enum(void)
{
    enum { N = 100000 };
    _cleanup_(json_decrefp) json_t *values = json_array();
    for (int i = 0; i < N; i++)
        json_array_append_new(values, json_integer(i));
    _cleanup_(json_decrefp) json_t *schema = json_pack("{s:{s:O}}", "items", "enum", values);
    _cleanup_(json_decrefp) json_t *inst = json_array();
    for (int i = 0; i < 100; i++)
        json_array_append_new(inst, json_integer(N - 1));
    char why[300] = "";
    ok(schema_check(schema, inst, "arguments", why, sizeof why) == -1,
       "100 items against a 100000-value enum is over budget");
    is_str(why, "arguments: schema too costly to check (over 2000000 steps)", "  reason");
    json_array_clear(inst);
    json_array_append_new(inst, json_integer(N - 1));
    ok(schema_check(schema, inst, "arguments", why, sizeof why) == 0, "  one item is not");
}

/* Recursion follows the instance: 64 levels of nesting is where it stops. */
static void test_deep_instance(void)
{
    char inst[4096], why[300] = "";
    size_t o = 0;
    for (int i = 0; i < 20; i++)
        o += (size_t)snprintf(inst + o, sizeof inst - o, "{'name':'n','children':[");
    o += (size_t)snprintf(inst + o, sizeof inst - o, "{'name':'leaf'}");
    for (int i = 0; i < 20; i++)
        o += (size_t)snprintf(inst + o, sizeof inst - o, "]}");
    ok(check(TREE, inst, why, sizeof why) == 0, "tree 20 deep is checked");

    o = 0;
    for (int i = 0; i < 40; i++)
        o += (size_t)snprintf(inst + o, sizeof inst - o, "{'name':'n','children':[");
    o += (size_t)snprintf(inst + o, sizeof inst - o, "{'name':'leaf'}");
    for (int i = 0; i < 40; i++)
        o += (size_t)snprintf(inst + o, sizeof inst - o, "]}");
    ok(check(TREE, inst, why, sizeof why) == -1, "tree 40 deep (over 64 schema levels) is refused");
    is_str(why,
           "arguments.children[0].children[0].children[0].children[0]..."
           "[0].children[0].children[0].children[0].children[0].name: "
           "schema nesting deeper than 64 levels (or a $ref cycle)",
           "  reason, with the path's middle cut");
}

/* Large instances stay cheap: hashing, not n^2 comparisons; cached regexes. */
static void test_large(void)
{
    enum { N = 20000 };
    json_t *arr = json_array();
    for (int i = 0; i < N; i++)
        json_array_append_new(arr, json_integer(i));
    _cleanup_(json_decrefp) json_t *inst = arr;
    _cleanup_(json_decrefp) json_t *uniq = load("{'uniqueItems':true,'items':{'type':'integer'}}");
    char why[300] = "";
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ok(schema_check(uniq, inst, "arguments", why, sizeof why) == 0,
       "20000 distinct items are unique");
    json_array_append_new(arr, json_real(19999.0));
    ok(schema_check(uniq, inst, "arguments", why, sizeof why) == -1,
       "a duplicate at the end is found");
    is_str(why, "arguments: items 19999 and 20000 are equal", "  reason");
    ok(seconds_since(&t0) < 5.0, "  in bounded time");

    _cleanup_(json_decrefp) json_t *strs = json_array();
    for (int i = 0; i < 5000; i++)
        json_array_append_new(strs, json_string("abc-123"));
    _cleanup_(json_decrefp) json_t *pat = load("{'items':{'pattern':'^[a-z]+-\\\\d+$'}}");
    ok(schema_check(pat, strs, "arguments", why, sizeof why) == 0,
       "5000 strings against one pattern");

    /* More patterns than the cache holds: compiled per use, still correct. */
    char schema[4096];
    size_t o = (size_t)snprintf(schema, sizeof schema, "{'patternProperties':{");
    for (int i = 0; i < 40; i++)
        o += (size_t)snprintf(schema + o, sizeof schema - o, "%s'^p%d$':{'type':'string'}",
                              i ? "," : "", i);
    snprintf(schema + o, sizeof schema - o, "},'additionalProperties':false}");
    ok(check(schema, "{'p0':'a','p39':'b'}", why, sizeof why) == 0, "40 patternProperties");
    ok(check(schema, "{'p39':1}", why, sizeof why) == -1, "  the 40th still checks");
    is_str(why, "arguments.p39: expected a string, got number", "  reason");
}

static void test_api(void)
{
    char why[300] = "";
    _cleanup_(json_decrefp) json_t *s = load(ECHO);
    _cleanup_(json_decrefp) json_t *bad = load("{'message':1}");
    ok(schema_check(s, bad, "params.arguments", why, sizeof why) == -1, "ROOT_NAME names the top");
    is_str(why, "params.arguments.message: expected a string, got number", "  reason");
    ok(schema_check(s, bad, "arguments", NULL, 0) == -1, "NULL why is allowed");
    char small[12];
    ok(schema_check(s, bad, "arguments", small, sizeof small) == -1 && strlen(small) == 11,
       "a short why is cut, NUL-terminated");
    ok(schema_check(NULL, bad, "arguments", why, sizeof why) == -1, "no schema refuses");
    is_str(why, "arguments: nothing to check", "  reason");

    /* Paths under long keys are capped, and say so. */
    char key[300], schema[400], inst[400];
    memset(key, 'k', 200);
    key[200] = '\0';
    snprintf(schema, sizeof schema, "{'required':['%s']}", key);
    snprintf(inst, sizeof inst, "{}");
    ok(check(schema, inst, why, sizeof why) == -1 && strlen(why) < 140 && strstr(why, "...\"]"),
       "a 200-byte key is quoted with a cap");
    printf("#   %s\n", why);
}

int main(void)
{
    test_cases();
    test_redos();
    test_fanout();
    test_deep_instance();
    test_long_enum();
    test_large();
    test_api();
    return done_testing();
}
