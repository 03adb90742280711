package contract

import "strings"

// DirectiveHeader is the request header by which a write names its
// directive (the task or instruction on whose behalf it writes, as
// lastWriter `<agent>:<directive>` does): a service account, whose
// principal names no directive, sends it on any write. A principal
// named `<agent>:<directive>` carries its directive in its name; a
// header that names another is refused (DirectiveOf).
const DirectiveHeader = "Eskv-Directive"

// MaxDirectiveLen is the longest directive, in bytes.
const MaxDirectiveLen = 64

// ValidateDirective checks a directive given in DirectiveHeader: 1 to
// MaxDirectiveLen characters of A-Z a-z 0-9 . _ - (an identifier, never
// free text: it is written into every log line and audit row of the
// write).
func ValidateDirective(d string) error {
	switch {
	case d == "":
		return FieldErrorf(EInvalid, DirectiveHeader, "%s is empty: name a directive or leave the header out", DirectiveHeader)
	case len(d) > MaxDirectiveLen:
		return FieldErrorf(EInvalid, DirectiveHeader, "%s is longer than %d characters", DirectiveHeader, MaxDirectiveLen)
	case !directiveChars(d):
		return FieldErrorf(EInvalid, DirectiveHeader, "%s %q holds a character outside A-Z a-z 0-9 . _ -", DirectiveHeader, d)
	}
	return nil
}

func directiveChars(d string) bool {
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// SplitPrincipal splits a principal named `<agent>:<directive>` at its
// first ':' into its agent and directive. A principal without ':', or
// whose part after it is not a valid directive, is an agent (a service
// account) with no directive of its own.
func SplitPrincipal(principal string) (agent, directive string) {
	a, d, ok := strings.Cut(principal, ":")
	if !ok || a == "" || ValidateDirective(d) != nil {
		return principal, ""
	}
	return a, d
}

// DirectiveOf is the directive of a write by principal whose request
// sent header (DirectiveHeader; "" when absent): the principal's own
// when it names one, else the header's, else "". A header that is not a
// valid directive, or that names another directive than the principal's,
// is refused (invalid, field DirectiveHeader).
func DirectiveOf(principal, header string, sent bool) (string, error) {
	_, own := SplitPrincipal(principal)
	if !sent {
		return own, nil
	}
	if err := ValidateDirective(header); err != nil {
		return "", err
	}
	if own != "" && header != own {
		return "", FieldErrorf(EInvalid, DirectiveHeader, "%s %q differs from the directive %q of principal %s: leave the header out or send %q",
			DirectiveHeader, header, own, principal, own)
	}
	return header, nil
}
