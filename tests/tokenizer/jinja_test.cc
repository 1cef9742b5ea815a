// The Jinja subset: expressions, statements, whitespace control, scoping,
// errors with positions, limits, and a fuzz of random and mutated templates.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "tokenizer/chat_templates_builtin.h"
#include "tokenizer/jinja/template.h"

namespace duet::jinja {
namespace {

Dict sample_context() {
  List messages;
  for (const auto& [role, content] : {std::pair{"system", "Be brief."}, {"user", " Hi "}, {"assistant", "Hello"}}) {
    Dict m;
    m.set("role", Value(role));
    m.set("content", Value(content));
    messages.emplace_back(std::move(m));
  }
  Dict ctx;
  ctx.set("messages", Value(std::move(messages)));
  ctx.set("n", Value(3));
  ctx.set("s", Value("a,b,,c"));
  return ctx;
}

Result<std::string> render(std::string_view source, const Limits& limits = {}) {
  DUET_ASSIGN(const Template t, Template::parse(source));
  return t.render(sample_context(), limits);
}

std::string ok(std::string_view source) {
  auto r = render(source);
  EXPECT_TRUE(r.ok()) << source << "\n -> " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : "<error>";
}

std::string error_of(std::string_view source, const Limits& limits = {}) {
  auto r = render(source, limits);
  EXPECT_FALSE(r.ok()) << source << " rendered as " << (r.ok() ? *r : "");
  return r.ok() ? "" : r.error().message;
}

TEST(Jinja, LiteralsPrintAsPython) {
  EXPECT_EQ(ok("{{ 1 }} {{ -2 }} {{ 1.5 }} {{ 1.0 }} {{ 1e3 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e-5 }}"),
            "1 -2 1.5 1.0 1000.0 0.30000000000000004 1e+16 1e-05");
  EXPECT_EQ(ok("{{ 'a' }} {{ \"b\" }} {{ 'it\\'s' }} {{ 'x\\ty' }} {{ '\\u00e9' }}"), "a b it's x\ty \xC3\xA9");
  EXPECT_EQ(ok("{{ [1, 'a', none, true] }} {{ {'k': [1.5]} }} {{ none }} {{ false }} {{ (1, 2) }}"),
            "[1, 'a', None, True] {'k': [1.5]} None False [1, 2]");
  EXPECT_EQ(ok("{{ 'adj' 'acent' }}{{ undefined_name }}|"), "adjacent|");
}

TEST(Jinja, Operators) {
  EXPECT_EQ(ok("{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7.5 % 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }}"),
            "3.5 3 -4 2 1.5 1024 0.5");
  EXPECT_EQ(ok("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 10 - 2 - 3 }} {{ true + 1 }} {{ 1 == 1.0 }}"), "7 9 5 2 True");
  EXPECT_EQ(ok("{{ 'a' ~ 1 ~ none }} {{ 'ab' + 'c' }} {{ 'x' * 3 }} {{ [1] + [2] }} {{ 2 * [0] }}"),
            "a1None abc xxx [1, 2] [0, 0]");
  EXPECT_EQ(ok("{{ 1 < 2 }} {{ 'b' >= 'a' }} {{ 2 != 2 }} {{ 'b' in 'abc' }} {{ 3 not in [1, 2] }} {{ 'k' in {'k': 1} }}"),
            "True True False True True True");
  EXPECT_EQ(ok("{{ 0 or 'x' }} {{ 1 and 2 }} {{ not 0 }} {{ not 1 == 1 }} {{ 'y' if n > 2 else 'z' }} {{ 'y' if false }}|"),
            "x 2 True False y |");
  EXPECT_EQ(ok("{{ 'a' + 'b' | upper }} {{ -n | abs }}"), "aB 3");  // filters bind tighter than + and unary -
  EXPECT_NE(error_of("{{ 1 / 0 }}").find("division by zero"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 + 'a' }}").find("'+': int and string"), std::string::npos);
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 < 2 < 3 }}").find("chained comparison"), std::string::npos);
}

TEST(Jinja, AccessAndSlicing) {
  EXPECT_EQ(ok("{{ messages[0]['role'] }} {{ messages[1].content }} {{ messages[-1].role }} {{ messages | length }}"),
            "system  Hi  assistant 3");
  EXPECT_EQ(ok("{{ [1, 2, 3][1:] }} {{ [1, 2, 3][::-1] }} {{ [1, 2, 3][:-1] }} {{ [1, 2, 3][5:] }} {{ [1,2,3,4][::2] }}"),
            "[2, 3] [3, 2, 1] [1, 2] [] [1, 3]");
  EXPECT_EQ(ok("{{ 'h\xC3\xA9llo'[1:3] }} {{ 'abc'[-1] }} {{ 'abc'[::-1] }}"), "\xC3\xA9l c cba");
  EXPECT_EQ(ok("{{ messages[1:] | length }} {{ messages[1:][0].role }}"), "2 user");
  // Missing members are undefined (printing nothing), looking into undefined is an error.
  EXPECT_EQ(ok("{{ messages[0].missing }}|{{ messages[9] }}|{{ messages[0].missing is defined }}"), "||False");
  EXPECT_NE(error_of("{{ nothing.role }}").find("'nothing' is undefined"), std::string::npos);
}

TEST(Jinja, FiltersAndTests) {
  EXPECT_EQ(ok("{{ '  x  ' | trim }}|{{ 'aB' | upper }}{{ 'aB' | lower }} {{ 'hello world' | title }} {{ 'hI' | capitalize }}"),
            "x|ABab Hello World Hi");
  EXPECT_EQ(ok("{{ [1, 2] | first }}{{ [1, 2] | last }} {{ ['a', 'b'] | join('-') }} {{ 'aXbX' | replace('X', '.') }}"),
            "12 a-b a.b.");
  EXPECT_EQ(ok("{{ missing | default('d') }} {{ '' | default('e', true) }} {{ 'v' | d('f') }} {{ 'abc' | length }}"),
            "d e v 3");
  EXPECT_EQ(ok("{{ {'a': [1, 'é\"'], 'b': none, 'c': true, 'd': 1.5} | tojson }}"),
            "{\"a\": [1, \"é\\\"\"], \"b\": null, \"c\": true, \"d\": 1.5}");
  EXPECT_EQ(ok("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(ok("{{ messages | selectattr('role', 'equalto', 'user') | list | length }} "
               "{{ messages | map(attribute='role') | join(',') }} {{ [3, 1, 2] | sort }} {{ 'ab' | list }}"),
            "1 system,user,assistant [1, 2, 3] ['a', 'b']");
  EXPECT_EQ(ok("{{ x is defined }} {{ n is defined }} {{ none is none }} {{ 's' is string }} {{ n is not string }} "
               "{{ 6 is divisibleby 3 }} {{ n is odd }} {{ {} is mapping }} {{ false is false }}"),
            "False True True True True True True True True");
  EXPECT_NE(error_of("{{ 'x' | wordwrap }}").find("unsupported filter 'wordwrap' at line 1:8"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 is prime }}").find("unsupported test 'prime'"), std::string::npos);
}

TEST(Jinja, StringAndDictMethods) {
  EXPECT_EQ(ok("{{ ' x '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\nab'.lstrip('\\n') }}|{{ 'ab  '.rstrip() }}|"),
            "x|a|ab|ab|");
  EXPECT_EQ(ok("{{ s.split(',') }} {{ ' a  b '.split() }} {{ s.split(',', 1) }} {{ 'a</think>b'.split('</think>')[-1] }}"),
            "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b,,c'] b");
  EXPECT_EQ(ok("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'gpt4 correct'.title() }} "
               "{{ 'Ab'.upper() }}{{ 'Ab'.lower() }} {{ 'a-b'.replace('-', '+') }} {{ ','.join(['1', '2']) }}"),
            "True True Gpt4 Correct ABab a+b 1,2");
  EXPECT_EQ(ok("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %} {{ {'a': 1}.get('b', 0) }} "
               "{{ {'a': 1}.keys() }}"),
            "a=1;b=2; 0 ['a']");
  EXPECT_NE(error_of("{{ 'x'.zfill(3) }}").find("unsupported string method 'zfill'"), std::string::npos);
  EXPECT_NE(error_of("{{ [1].append(2) }}").find("unsupported method 'append' on a list"), std::string::npos);
}

TEST(Jinja, Loops) {
  EXPECT_EQ(ok("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
               "{{ loop.length }}{{ loop.revindex }};{% endfor %}"),
            "10TrueFalse33;21FalseFalse32;32FalseTrue31;");
  EXPECT_EQ(ok("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(ok("{% for m in messages if m.role != 'system' %}{{ loop.index }}{{ m.role }}{% endfor %}"),
            "1user2assistant");
  EXPECT_EQ(ok("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 4 %}{% break %}{% endif %}"
               "{{ i }}{% endfor %}"),
            "0134");
  EXPECT_EQ(ok("{% for c in 'ab' %}{{ c }}.{% endfor %}{% for k in {'x': 1} %}{{ k }}{% endfor %}"
               "{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}"),
            "a.b.x135");
  EXPECT_EQ(ok("{% for x in missing %}x{% endfor %}ok"), "ok");
}

TEST(Jinja, ScopingFollowsJinja) {
  // A set inside a loop is fresh each iteration and gone after it.
  EXPECT_EQ(ok("{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}"), "01020");
  // if opens no scope.
  EXPECT_EQ(ok("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
  // namespace() carries values out of a loop.
  EXPECT_EQ(ok("{% set ns = namespace(found=false, n=0) %}{% for m in messages %}{% if m.role == 'user' %}"
               "{% set ns.found = true %}{% endif %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.found }} {{ ns.n }}"),
            "True 3");
  EXPECT_NE(error_of("{% set d = {} %}{% set d.x = 1 %}").find("needs a namespace() object"), std::string::npos);
}

TEST(Jinja, WhitespaceControl) {
  EXPECT_EQ(ok("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(ok("a\n  {%- if true -%}\n  b\n  {%- endif %}\nc"), "abc");
  // trim_blocks and lstrip_blocks, as Hugging Face configures them.
  EXPECT_EQ(ok("a\n  {% if true %}\n  b\n  {% endif %}\nc\n"), "a\n  b\nc");
  EXPECT_EQ(ok("a\n  {# note #}  \n  {{ 1 }} {%+ if true %}x{% endif %}\n\n"), "a\n  \n  1 x");
  EXPECT_EQ(ok("{{ 'x' }}\n"), "x");  // one trailing newline is dropped
  EXPECT_EQ(ok("{{ 'x' }}\n\n"), "x\n");
}

TEST(Jinja, ErrorsNameTheConstructAndPosition) {
  EXPECT_NE(error_of("a\n  {% macro f() %}{% endmacro %}").find("unsupported template tag '{% macro %}' at line 2:3"),
            std::string::npos);
  EXPECT_NE(error_of("{% if x %}").find("'{% if %}' at line 1:1 has no '{% endif %}'"), std::string::npos);
  EXPECT_NE(error_of("{% for x in y %}{% endif %}").find("unexpected '{% endif %}'"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 +  }}").find("expected an expression but found '}}' at line 1:9"), std::string::npos);
  EXPECT_NE(error_of("x {{ 'abc }}").find("unterminated string starting at line 1:6"), std::string::npos);
  EXPECT_NE(error_of("{# open").find("unterminated comment"), std::string::npos);
  EXPECT_NE(error_of("{{ a ? b }}").find("unexpected character '?' at line 1:6"), std::string::npos);
  EXPECT_NE(error_of("{{ foo(1) }}").find("unsupported function 'foo'"), std::string::npos);
  EXPECT_NE(error_of("{% set x %}y{% endset %}").find("unsupported block"), std::string::npos);
  EXPECT_EQ(error_of("{{ raise_exception('Roles must alternate') }}"), "template error: Roles must alternate");
  EXPECT_NE(error_of("{% break %}").find("outside a loop"), std::string::npos);
}

TEST(Jinja, LimitsStopRunawayTemplates) {
  EXPECT_NE(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
                .find("units of work"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 100000000000 }}").find("exceeds the limit"), std::string::npos);
  EXPECT_NE(error_of("{{ range(10000000000) }}").find("exceeds the limit"), std::string::npos);
  Limits unlimited_work;
  unlimited_work.max_work = int64_t{1} << 50;
  EXPECT_NE(error_of("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                     unlimited_work)
                .find("exceeds the limit"),
            std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(l=[0]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
                     unlimited_work)
                .find("exceeds the limit"),
            std::string::npos);
  Limits small;
  small.max_output_bytes = 1000;
  EXPECT_NE(error_of("{% for i in range(2000) %}ab{% endfor %}", small).find("output exceeds 1000 bytes"),
            std::string::npos);
  const std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_NE(error_of(deep).find("nested more than"), std::string::npos);
  std::string deep_blocks;
  for (int i = 0; i < 500; ++i) deep_blocks += "{% if true %}";
  EXPECT_NE(error_of(deep_blocks).find("nested more than"), std::string::npos);
  EXPECT_NE(error_of(std::string(5000, '-') + "{{ " + std::string(5000, '-') + "1 }}").find("nested more than"),
            std::string::npos);
  // A namespace may not come to hold itself (a cycle would never be freed).
  EXPECT_NE(error_of("{% set ns = namespace(a=1) %}{% set ns.a = [1, {'k': ns}] %}").find("hold itself at line 1:30"),
            std::string::npos);
  EXPECT_NE(error_of("{% set a = namespace() %}{% set b = namespace(x=a) %}{% set a.y = [b] %}").find("hold itself"),
            std::string::npos);
  EXPECT_EQ(ok("{% set a = namespace() %}{% set b = namespace(x=a) %}{% set a.y = 1 %}{{ b.x.y }}"), "1");
  // Deeply nested values print without deep recursion.
  EXPECT_FALSE(ok("{% set ns = namespace(v=0) %}{% for i in range(5000) %}{% set ns.v = [ns.v] %}{% endfor %}"
                  "{{ ns.v }}{{ ns.v | tojson }}{{ ns.v == ns.v }}")
                   .empty());
  // A list holding one list twice, 200 times over, is small in memory but
  // 2^200 items to walk (fuzz_jinja found it): printing, comparing and
  // searching it stop after kMaxWalkItems items rather than never end.
  const std::string doubled =
      "{% set ns = namespace(a=[], b=[]) %}{% for i in range(200) %}{% set ns.a = [ns.a, ns.a] %}"
      "{% set ns.b = [ns.b, ns.b] %}{% endfor %}";
  EXPECT_EQ(ok(doubled + "{{ ns.a == ns.a }} {{ ns.a in [ns.a] }} {{ ns.a < ns.a }} {{ [ns.a] == [ns.b] }}"),
            "True True False False");
  EXPECT_NE(error_of(doubled + "{{ ns.a }}", small).find("output exceeds 1000 bytes"), std::string::npos);
  EXPECT_NE(error_of(doubled + "{{ ns.a | tojson }}", small).find("output exceeds 1000 bytes"), std::string::npos);
}

// Random templates from fragments, and byte mutations of the real chat
// templates: each must parse and render or fail with a message, within the
// limits, without crashing or hanging.
TEST(Jinja, FuzzRandomAndMutatedTemplates) {
  const char* fragments[] = {
      "{{ ", " }}", "{% ", " %}", "{%- ", " -%}", "{# c #}", "if ", "elif ", "else", "endif", "for ", " in ",
      "endfor", "set ", "x", " = ", "messages", "[0]", "[1:]", "[::-1]", ".role", "['content']", " | trim",
      " | length", " | tojson", "(", ")", "[", "]", "{", "}", ",", ":", " + ", " ~ ", " * ", " / ", " // ",
      " % ", " ** ", " == ", " and ", " or ", "not ", " is defined", " is none", "'s'", "\"t\"", "1", "2.5",
      "-", "loop.index", "namespace(a=1)", "ns.a", "range(5)", "raise_exception('e')", ".strip()",
      ".split(',')", "true", "none", "text\n", "  ", "\n", "'\\u00e9'", "{%", "%}", "{{", "}}", "break",
      "range(999999999)", "'ab' * 99999", " if ", " else ",
  };
  std::mt19937 rng(1234);
  Limits limits;
  limits.max_output_bytes = 1 << 16;
  limits.max_value_size = 1 << 16;
  limits.max_work = 1 << 20;
  int rendered = 0, failed = 0;
  const auto attempt = [&](const std::string& source) {
    auto t = Template::parse(source);
    if (!t) {
      EXPECT_FALSE(t.error().message.empty());
      ++failed;
      return;
    }
    auto r = t->render(sample_context(), limits);
    if (r) {
      EXPECT_LE(r->size(), limits.max_output_bytes);
      ++rendered;
    } else {
      EXPECT_FALSE(r.error().message.empty());
      ++failed;
    }
  };
  for (int i = 0; i < 400; ++i) {
    std::string source;
    const int n = 1 + static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) source += fragments[rng() % std::size(fragments)];
    attempt(source);
  }
  for (const auto name : builtin_chat_template_names()) {
    const std::string real(*builtin_chat_template(name));
    for (int i = 0; i < 60; ++i) {
      std::string m = real;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !m.empty(); ++e) {
        const size_t at = rng() % m.size();
        switch (rng() % 3) {
          case 0: m.erase(at, 1 + rng() % 8); break;
          case 1: m.insert(at, 1, "{}%#-'\"()[]|.~ \n"[rng() % 16]); break;
          default: m.insert(at, m.substr(rng() % m.size(), rng() % 40)); break;
        }
      }
      attempt(m);
    }
  }
  EXPECT_GT(rendered, 20);  // the fuzz reaches the evaluator, not only parse errors
  EXPECT_GT(failed, 20);
}

}  // namespace
}  // namespace duet::jinja
