"""Secret redaction, by role.

- `modes`: which redaction `index` applies (`extended` or `reference`) and redaction
  for display;
- `reference`: the reference engine's redactor, byte for byte;
- `extended`: the reference's rules, then detect-secrets' and ours (`secret_rules.json`);
- `gate`: a literal pre-check that spares shown text from loading every rule.
"""
