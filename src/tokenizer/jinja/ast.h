// The parsed template: statements holding expressions. One node type each,
// told apart by `kind`, with the fields that kind uses.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/value.h"

namespace duet::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // value
    kName,      // name
    kList,      // args: elements
    kDict,      // args: key, value, key, value, ...
    kAttr,      // args[0].name
    kIndex,     // args[0][args[1]]
    kSlice,     // args[0][args[1]:args[2]:args[3]]; absent parts are null
    kCall,      // args[0](args[1:], kwargs): a global function or a method (callee kAttr)
    kFilter,    // args[0] | name(args[1:], kwargs)
    kTest,      // args[0] is [not] name(args[1:])
    kUnary,     // name: "not", "-", "+"; args[0]
    kBinary,    // name: the operator; args[0], args[1]
    kCond,      // args[1] if args[0] else args[2] (args[2] may be null)
  };
  Kind kind;
  Pos pos;
  Value value;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;
};

struct Stmt;
using Body = std::vector<Stmt>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches: (condition, body); a null condition is the else
    kFor,       // for targets in expr [if cond]: body [else: else_body]
    kSet,       // set targets[0][.attr] = expr
    kBreak,
    kContinue,
  };
  Kind kind;
  Pos pos;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::string> targets;
  std::string attr;
  Body body, else_body;
  bool uses_loop = false;  // kFor: whether the body or condition reads `loop` (else it is not built)
};

}  // namespace duet::jinja
