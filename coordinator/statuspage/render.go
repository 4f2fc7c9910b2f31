package statuspage

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"strings"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

// templates holds "page" (the whole document) and "body" (the fragment
// that live updates replace).
var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"stamp": stamp,
	"join":  strings.Join,
}).ParseFS(templateFS, "templates/*.html"))

// stamp formats a time for the page, in UTC to the second.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// RenderPage renders the whole page of v.
func RenderPage(v View) ([]byte, error) { return render("page", v) }

// RenderBody renders the fragment of v that live updates swap in.
func RenderBody(v View) ([]byte, error) { return render("body", v) }

func render(name string, v View) ([]byte, error) {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, v); err != nil {
		return nil, fmt.Errorf("statuspage: render %s: %w", name, err)
	}
	return b.Bytes(), nil
}
