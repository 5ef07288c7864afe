//! Latency expressions of a standard's timing constraints: whole numbers,
//! timing parameters by name (and `BL`, the burst length), `+ - * /`
//! (integer division), parentheses and `max(a, b, ...)`. Written as text in
//! the standard's table (`CL + BL/2 + 2 - CWL`), parsed once, every name
//! checked against the standard's parameters, evaluated for a configuration.

use std::fmt;

/// A parsed latency expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    Int(i64),
    /// A timing parameter, or `BL`.
    Name(String),
    Add(Box<Expr>, Box<Expr>),
    Sub(Box<Expr>, Box<Expr>),
    Mul(Box<Expr>, Box<Expr>),
    Div(Box<Expr>, Box<Expr>),
    Max(Vec<Expr>),
}

impl Expr {
    /// Parses `text`; every name must be one of `names` (the error says
    /// which is not, and what was expected).
    pub fn parse(text: &str, names: &[&str]) -> Result<Expr, String> {
        let tokens = tokenize(text)?;
        let mut p = Parser {
            tokens,
            at: 0,
            names,
            text,
        };
        let e = p.sum()?;
        if p.at != p.tokens.len() {
            return Err(format!(
                "`{text}`: unexpected `{}`; expected an operator (+ - * /) or the end",
                p.tokens[p.at]
            ));
        }
        Ok(e)
    }

    /// The value, with each name's value from `value` (integer division
    /// rounds toward zero; a division by zero gives 0).
    pub fn eval(&self, value: &dyn Fn(&str) -> i64) -> i64 {
        match self {
            Expr::Int(v) => *v,
            Expr::Name(n) => value(n),
            Expr::Add(a, b) => a.eval(value) + b.eval(value),
            Expr::Sub(a, b) => a.eval(value) - b.eval(value),
            Expr::Mul(a, b) => a.eval(value) * b.eval(value),
            Expr::Div(a, b) => a.eval(value).checked_div(b.eval(value)).unwrap_or(0),
            Expr::Max(v) => v.iter().map(|e| e.eval(value)).max().unwrap_or(0),
        }
    }

    /// Every name the expression uses, in order of appearance.
    pub fn names(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Expr::Int(_) => {}
            Expr::Name(n) => out.push(n),
            Expr::Add(a, b) | Expr::Sub(a, b) | Expr::Mul(a, b) | Expr::Div(a, b) => {
                a.collect(out);
                b.collect(out);
            }
            Expr::Max(v) => v.iter().for_each(|e| e.collect(out)),
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Int(v) => write!(f, "{v}"),
            Expr::Name(n) => write!(f, "{n}"),
            Expr::Add(a, b) => write!(f, "{a} + {b}"),
            Expr::Sub(a, b) => match **b {
                Expr::Add(..) | Expr::Sub(..) => write!(f, "{a} - ({b})"),
                _ => write!(f, "{a} - {b}"),
            },
            Expr::Mul(a, b) => write!(f, "{} * {}", Paren(a), Paren(b)),
            Expr::Div(a, b) => write!(f, "{}/{}", Paren(a), Paren(b)),
            Expr::Max(v) => {
                write!(f, "max(")?;
                for (i, e) in v.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{e}")?;
                }
                write!(f, ")")
            }
        }
    }
}

/// A factor of a product, in parentheses when it is a sum.
struct Paren<'a>(&'a Expr);

impl fmt::Display for Paren<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Expr::Add(..) | Expr::Sub(..) => write!(f, "({})", self.0),
            e => write!(f, "{e}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Int(i64),
    Name(String),
    Op(char),
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Int(v) => write!(f, "{v}"),
            Token::Name(n) => write!(f, "{n}"),
            Token::Op(c) => write!(f, "{c}"),
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(i, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c.is_ascii_digit() {
            let mut end = i;
            while let Some(&(j, d)) = chars.peek() {
                if !d.is_ascii_digit() {
                    break;
                }
                end = j + d.len_utf8();
                chars.next();
            }
            let v = text[i..end]
                .parse()
                .map_err(|_| format!("`{text}`: {} is too large", &text[i..end]))?;
            out.push(Token::Int(v));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let mut end = i;
            while let Some(&(j, d)) = chars.peek() {
                if !(d.is_ascii_alphanumeric() || d == '_') {
                    break;
                }
                end = j + d.len_utf8();
                chars.next();
            }
            out.push(Token::Name(text[i..end].to_string()));
        } else if "+-*/(),".contains(c) {
            out.push(Token::Op(c));
            chars.next();
        } else {
            return Err(format!(
                "`{text}`: unexpected `{c}`; expected numbers, timing names, + - * /, parentheses and max(...)"
            ));
        }
    }
    if out.is_empty() {
        return Err("empty; expected a latency such as `tRCD` or `CL + BL/2 + 2 - CWL`".into());
    }
    Ok(out)
}

struct Parser<'a> {
    tokens: Vec<Token>,
    at: usize,
    names: &'a [&'a str],
    text: &'a str,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, op: char) -> bool {
        if self.peek() == Some(&Token::Op(op)) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn sum(&mut self) -> Result<Expr, String> {
        let mut e = self.product()?;
        loop {
            if self.eat('+') {
                e = Expr::Add(Box::new(e), Box::new(self.product()?));
            } else if self.eat('-') {
                e = Expr::Sub(Box::new(e), Box::new(self.product()?));
            } else {
                return Ok(e);
            }
        }
    }

    fn product(&mut self) -> Result<Expr, String> {
        let mut e = self.atom()?;
        loop {
            if self.eat('*') {
                e = Expr::Mul(Box::new(e), Box::new(self.atom()?));
            } else if self.eat('/') {
                e = Expr::Div(Box::new(e), Box::new(self.atom()?));
            } else {
                return Ok(e);
            }
        }
    }

    fn atom(&mut self) -> Result<Expr, String> {
        let text = self.text;
        let Some(t) = self.peek().cloned() else {
            return Err(format!(
                "`{text}` ends early; expected a number, a timing name or `(`"
            ));
        };
        self.at += 1;
        match t {
            Token::Int(v) => Ok(Expr::Int(v)),
            Token::Op('(') => {
                let e = self.sum()?;
                if !self.eat(')') {
                    return Err(format!("`{text}`: expected `)`"));
                }
                Ok(e)
            }
            Token::Name(n) if n == "max" && self.peek() == Some(&Token::Op('(')) => {
                self.at += 1;
                let mut v = vec![self.sum()?];
                while self.eat(',') {
                    v.push(self.sum()?);
                }
                if !self.eat(')') {
                    return Err(format!("`{text}`: expected `,` or `)` in max(...)"));
                }
                Ok(Expr::Max(v))
            }
            Token::Name(n) => {
                if self.names.contains(&n.as_str()) {
                    Ok(Expr::Name(n))
                } else {
                    Err(format!(
                        "`{text}`: unknown timing `{n}`; expected one of {}",
                        self.names.join(", ")
                    ))
                }
            }
            Token::Op(c) => Err(format!(
                "`{text}`: unexpected `{c}`; expected a number, a timing name or `(`"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: &[&str] = &["CL", "CWL", "BL", "tRTRS", "tCCD_L"];

    fn val(n: &str) -> i64 {
        match n {
            "CL" => 22,
            "CWL" => 16,
            "BL" => 8,
            "tRTRS" => 2,
            "tCCD_L" => 8,
            _ => unreachable!(),
        }
    }

    #[test]
    fn parses_and_evaluates_the_tables_forms() {
        for (text, want) in [
            ("CL + BL/2 + 2 - CWL", 12),
            ("CWL + BL/2 + tRTRS - CL", 0),
            ("max(BL/2, tCCD_L)", 8),
            ("9 * (CL - CWL)", 54),
            ("CL - (CWL - 2)", 8),
            ("7", 7),
        ] {
            let e = Expr::parse(text, NAMES).unwrap();
            assert_eq!(e.eval(&val), want, "{text}");
            // What it prints parses back to the same expression.
            let again = Expr::parse(&e.to_string(), NAMES).unwrap();
            assert_eq!(again, e, "{text} -> {e}");
        }
        assert_eq!(
            Expr::parse("max(CL, tCCD_L) + BL", NAMES).unwrap().names(),
            vec!["CL", "tCCD_L", "BL"]
        );
    }

    #[test]
    fn bad_expressions_say_what_was_expected() {
        for (text, says) in [
            ("tRDC + 2", "unknown timing `tRDC`"),
            ("CL +", "ends early"),
            ("CL CWL", "unexpected `CWL`"),
            ("(CL", "expected `)`"),
            ("CL % 2", "unexpected `%`"),
            ("", "empty"),
            ("max(CL", "in max(...)"),
        ] {
            let e = Expr::parse(text, NAMES).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
