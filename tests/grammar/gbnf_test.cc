// GBNF grammars accept and reject the strings they should, apart from any
// model; malformed grammars fail with line:column.
#include <gtest/gtest.h>

#include <string>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar_test_util.h"

namespace duet {
namespace {

std::shared_ptr<const Grammar> compile(const std::string& text) {
  auto g = Grammar::from_gbnf(text);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return g.ok() ? *g : nullptr;
}

using testing::is_prefix;
using testing::matches;

std::string parse_error(const std::string& text) {
  auto g = Grammar::from_gbnf(text);
  return g.ok() ? std::string("(no error)") : g.error().message;
}

const char* kArithmetic = R"G(
root  ::= expr
expr  ::= term (("+" | "-") term)*
term  ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")" | "-" factor
number ::= [0-9]+ ("." [0-9]+)?
)G";

TEST(Gbnf, Arithmetic) {
  auto g = compile(kArithmetic);
  ASSERT_TRUE(g);
  for (const char* ok : {"1", "1+2", "3*(4-5)/6", "-(1.5+2)*-3", "((((7))))", "10/2.25"})
    EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"", "+", "1+", "(1", "1)", "1..2", "a", "1 + 2", "()", "1.+2"})
    EXPECT_FALSE(matches(g, bad)) << bad;
  EXPECT_TRUE(is_prefix(g, "(1+"));
  EXPECT_FALSE(is_prefix(g, "(1+)"));
}

const char* kJson = R"G(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)G";

TEST(Gbnf, Json) {
  auto g = compile(kJson);
  ASSERT_TRUE(g);
  for (const char* ok : {R"G({})G", R"G({"a": 1})G", R"G({"a": [1, 2.5, -3e4, true, null], "b": {"c": "d\n\u00e9"}})G",
                         "{\"k\": \"\xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"}", "{\n  \"x\": false\n}"})
    EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {R"G([])G", R"G({"a" 1})G", R"G({"a": 01})G", R"G({"a": tru})G", R"G({"a": "\q"})G", R"G({a: 1})G",
                          R"G({"a": 1,})G", "{\"a\": \"\x01\"}", "{\"a\": \"\xC3\"}", "{\"a\": \"\xED\xA0\x80\"}"})
    EXPECT_FALSE(matches(g, bad)) << bad;
  // A multi-byte character may stop half-way (a token can end there).
  EXPECT_TRUE(is_prefix(g, "{\"a\": \"\xE2\x82"));
  EXPECT_FALSE(is_prefix(g, "{\"a\": \"\xE2\x41"));
}

TEST(Gbnf, CommaList) {
  auto g = compile(R"G(root ::= item ("," " "? item)*
item ::= [a-z]+)G");
  ASSERT_TRUE(g);
  for (const char* ok : {"a", "a,b", "ab, cd,ef", "x, y, z"}) EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"", ",", "a,", "a,,b", "a ,b", "A", "a,  b"}) EXPECT_FALSE(matches(g, bad)) << bad;
}

TEST(Gbnf, CIdentifier) {
  auto g = compile("root ::= [a-zA-Z_] [a-zA-Z0-9_]*");
  ASSERT_TRUE(g);
  for (const char* ok : {"x", "_", "foo_bar9", "__init__", "A1"}) EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"", "9x", "a-b", "a b", "\xC3\xA9"}) EXPECT_FALSE(matches(g, bad)) << bad;
}

TEST(Gbnf, RepetitionBounds) {
  auto g = compile(R"G(root ::= "a"{2,4} "b"{3} "c"{1,} "d"?)G");
  ASSERT_TRUE(g);
  EXPECT_TRUE(matches(g, "aabbbc"));
  EXPECT_TRUE(matches(g, "aaaabbbcccd"));
  EXPECT_FALSE(matches(g, "abbbc"));
  EXPECT_FALSE(matches(g, "aaaaabbbc"));
  EXPECT_FALSE(matches(g, "aabbc"));
  EXPECT_FALSE(matches(g, "aabbb"));
  EXPECT_FALSE(matches(g, "aabbbcdd"));
}

TEST(Gbnf, EscapesClassesAndAnyChar) {
  auto g = compile(R"G(root ::= "\x41\u00e9\U0001F600\t" [^a-c\]] . rule-with-dash
rule-with-dash ::= [\x30-\x39] # a digit
)G");
  ASSERT_TRUE(g);
  EXPECT_TRUE(matches(g, "A\xC3\xA9\xF0\x9F\x98\x80\tz\xE4\xB8\xAD" "7"));
  EXPECT_TRUE(matches(g, "A\xC3\xA9\xF0\x9F\x98\x80\t]?0") == false);
  EXPECT_FALSE(matches(g, "A\xC3\xA9\xF0\x9F\x98\x80\tb?0"));
  EXPECT_TRUE(matches(g, "A\xC3\xA9\xF0\x9F\x98\x80\t-\n5"));
}

TEST(Gbnf, CompletenessAndRejectionKeepsState) {
  auto g = compile(R"G(root ::= "yes" | "no")G");
  GrammarMatcher m(g);
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept_bytes("yex"));
  EXPECT_TRUE(m.accept_bytes("ye"));  // the failed call changed nothing
  GrammarMatcher copy = m;
  EXPECT_TRUE(copy.accept_bytes("s"));
  EXPECT_TRUE(copy.is_complete());
  EXPECT_FALSE(m.can_end());  // the clone moved on alone
  const GrammarState snap = m.state();
  EXPECT_TRUE(m.accept_bytes("s"));
  m.restore(snap);
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("s"));
}

TEST(Gbnf, RightRecursionKeepsStateFinite) {
  // Inside a long list the state comes back to the same stacks, which is
  // what lets masks be cached.
  auto g = compile(R"G(root ::= "[" ("x" ",")* "]")G");
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept_bytes("[x,"));
  const GrammarState s = m.state();
  ASSERT_TRUE(m.accept_bytes("x,x,x,x,"));
  EXPECT_EQ(m.state(), s);
}

TEST(Gbnf, ParseErrors) {
  EXPECT_NE(parse_error("root ::= \"abc").find("1:14"), std::string::npos) << parse_error("root ::= \"abc");
  EXPECT_NE(parse_error("root ::= \"abc").find("unterminated string"), std::string::npos);
  const std::string e2 = parse_error("root ::= a\na ::= [a-z\n");
  EXPECT_NE(e2.find("2:"), std::string::npos) << e2;
  EXPECT_NE(e2.find("character class"), std::string::npos) << e2;
  const std::string e3 = parse_error("root ::= (\"a\" | \"b\"\n");
  EXPECT_NE(e3.find("expected ')'"), std::string::npos) << e3;
  const std::string e4 = parse_error("root ::= foo\n");
  EXPECT_NE(e4.find("'foo'"), std::string::npos) << e4;
  EXPECT_NE(e4.find("not defined"), std::string::npos) << e4;
  EXPECT_NE(e4.find("1:10"), std::string::npos) << e4;
  EXPECT_NE(parse_error("a ::= \"x\"").find("no 'root'"), std::string::npos);
  EXPECT_NE(parse_error("root = \"x\"").find("'::='"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"{3,1}").find("max below min"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(parse_error("root ::= [z-a]").find("reversed"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\" )").find("1:14"), std::string::npos) << parse_error("root ::= \"a\" )");
}

TEST(Gbnf, LeftRecursionIsRejected) {
  const std::string e = parse_error("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"");
  EXPECT_NE(e.find("left-recursive"), std::string::npos) << e;
  EXPECT_NE(e.find("expr -> expr"), std::string::npos) << e;
  const std::string e2 = parse_error("root ::= a\na ::= b? \"x\" | \"y\"\nb ::= \"\" a");
  EXPECT_NE(e2.find("left-recursive"), std::string::npos) << e2;
  // A repeated part that can be empty would loop forever too.
  EXPECT_NE(parse_error("root ::= (\"a\"?)*").find("left-recursive"), std::string::npos);
}

TEST(Gbnf, Limits) {
  std::string deep = "root ::= " + std::string(1000, '(') + "\"a\"" + std::string(1000, ')');
  EXPECT_NE(parse_error(deep).find("nesting"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"{1,100000}").find("above"), std::string::npos);
  // Nested groups are shared rules, so nested counts do not multiply...
  EXPECT_EQ(parse_error("root ::= ((((\"ab\"{10000}){10000}){10000}){10000})"), "(no error)");
  // ...but many large bounded repetitions add up: the element limit, quickly.
  std::string many = "root ::= r0\n";
  for (int i = 0; i < 200; ++i) many += "r" + std::to_string(i) + " ::= \"a\"{0,10000}\n";
  const std::string e = parse_error(many);
  EXPECT_NE(e.find("more than"), std::string::npos) << e;
}

}  // namespace
}  // namespace duet
