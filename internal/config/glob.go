package config

import "errors"

// globMatch reports whether name matches pattern, where '*' matches any run
// of characters (including '/', unlike path.Match: group ids are not paths),
// '?' matches one character and '\' makes the next character literal.
func globMatch(pattern, name string) bool {
	// star and its resume point implement the usual backtracking over the
	// last '*' seen, which is linear enough for group ids.
	px, nx := 0, 0
	star, resume := -1, 0
	p, n := []rune(pattern), []rune(name)
	for nx < len(n) {
		if px < len(p) {
			switch c := p[px]; {
			case c == '*':
				star, resume = px, nx
				px++
				continue
			case c == '?':
				px++
				nx++
				continue
			case c == '\\' && px+1 < len(p):
				if p[px+1] == n[nx] {
					px += 2
					nx++
					continue
				}
			default:
				if c == n[nx] {
					px++
					nx++
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		px, nx = star+1, resume+1
		resume++
	}
	for px < len(p) && p[px] == '*' {
		px++
	}
	return px == len(p)
}

// checkGlob rejects a pattern that ends in a lone escape.
func checkGlob(pattern string) error {
	escaped := false
	for _, c := range pattern {
		escaped = !escaped && c == '\\'
	}
	if escaped {
		return errors.New("ends with a lone '\\'")
	}
	return nil
}
