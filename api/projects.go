package api

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
)

// projects serves GET /v1/projects?limit=&cursor=: the projects the
// caller may read keys of, each with the count of its live keys the
// caller may read, in key order (of their tenant/<t>/project/<p>/
// prefixes), paged like a listing (contract.ProjectsAnswer). A project
// is there once it holds a live key the caller may read: eskv keeps no
// registry of projects, so a project a grant names but that holds no key
// yet is not listed (and a grant below a project counts only the keys it
// covers). The counts come from the projection as it is (not awaited as
// a listing is, since the pages span partitions): a write acknowledged a
// moment before may not be counted yet.
func (s *Server) projects(c echo.Context) error {
	a, err := s.projectsOfQuery(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

// projectsOfQuery is the page of projects the request's query asks
// (limit, cursor: nothing else, each at most once), for GET /v1/projects
// and the status page's overview alike.
func (s *Server) projectsOfQuery(c echo.Context) (contract.ProjectsAnswer, error) {
	q := c.QueryParams()
	for name := range q {
		if name != "limit" && name != "cursor" {
			return contract.ProjectsAnswer{}, contract.FieldErrorf(contract.EInvalid, name, "unknown query parameter %q (limit, cursor)", name)
		}
	}
	if err := givenOnce(q); err != nil {
		return contract.ProjectsAnswer{}, err
	}
	limit, err := pageLimitOf(q, contract.DefaultProjectsLimit, contract.MaxProjectsLimit)
	if err != nil {
		return contract.ProjectsAnswer{}, err
	}
	after, err := projectsCursor(q.Get("cursor"))
	if err != nil {
		return contract.ProjectsAnswer{}, err
	}
	return s.projectsPage(c, limit, after)
}

// projectsPage is a page of GET /v1/projects for the request's
// principal: at most limit projects from after on (the status page's
// overview reads it too, so that both list the same projects).
func (s *Server) projectsPage(c echo.Context, limit int, after string) (contract.ProjectsAnswer, error) {
	release, err := s.takeList(c)
	if err != nil {
		return contract.ProjectsAnswer{}, err
	}
	defer release()
	var items []contract.ProjectInfo
	for _, r := range readRanges(principalOf(c), after) {
		// One more than the page's rest: the last may be the same
		// project as a later range's first, and is merged with it.
		got, err := s.list.Projects(c.Request().Context(), r, limit+2-len(items), s.now())
		if err != nil {
			return contract.ProjectsAnswer{}, err
		}
		for _, p := range got {
			if n := len(items); n > 0 && items[n-1].Scope() == p.Scope() {
				items[n-1].Keys += p.Keys
				continue
			}
			items = append(items, p)
		}
		if len(items) > limit {
			break
		}
	}
	a := contract.ProjectsAnswer{Items: items, Count: len(items)}
	if len(items) > limit {
		a.Items, a.Count, a.Truncated = items[:limit], limit, true
		a.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(items[limit-1].Scope() + "/"))
	}
	if a.Items == nil {
		a.Items = []contract.ProjectInfo{}
	}
	return a, nil
}

// projectsCursor reads the cursor of GET /v1/projects, the base64url of
// the last project's tenant/<t>/project/<p>/ prefix, and returns where
// the next page starts: the first key after that project's keys ("" for
// the first page).
func projectsCursor(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	scope, ok := strings.CutSuffix(string(b), "/")
	if err != nil || !ok || strings.Count(scope, "/") != 3 || contract.ValidatePrefix(scope+"/") != nil {
		return "", contract.FieldErrorf(contract.EInvalid, "cursor", "cursor is not one this listing returned")
	}
	return scope + "0", nil // '0' follows '/': past every key of the project
}

// readRanges are the key ranges p may read, from at on, in key order and
// disjoint: for each read grant on path g, the keys below it, [g/, g0),
// and when g is deeper than a project (so may be a key), g itself.
// Grants nest or are apart (they are whole components), so a range that
// starts inside the one before lies inside it.
func readRanges(p *Principal, at string) []projection.KeyRange {
	var rs []projection.KeyRange
	for _, g := range p.Grants {
		if !slices.Contains(g.Rights, Read) {
			continue
		}
		path := strings.TrimSuffix(g.Prefix, "/")
		rs = append(rs, projection.KeyRange{Lo: path + "/", Hi: path + "0"})
		if strings.Count(path, "/") >= 4 {
			rs = append(rs, projection.KeyRange{Lo: path, Hi: path + "\x01"}) // keys hold no byte below ' '
		}
	}
	slices.SortFunc(rs, func(a, b projection.KeyRange) int { return strings.Compare(a.Lo, b.Lo) })
	var out []projection.KeyRange
	for _, r := range rs {
		if n := len(out); n > 0 && r.Lo < out[n-1].Hi {
			out[n-1].Hi = max(out[n-1].Hi, r.Hi)
			continue
		}
		out = append(out, r)
	}
	clipped := out[:0]
	for _, r := range out {
		r.Lo = max(r.Lo, at)
		if r.Lo < r.Hi {
			clipped = append(clipped, r)
		}
	}
	return clipped
}
