// Whitespace control: trim_blocks, lstrip_blocks, -/+ modifiers, comments,
// raw blocks, newline handling.
// Every expected string below is what Python jinja2 3.1 renders in the
// transformers chat-template environment (see the conformance README);
// "error:K" means jinja2 raised the exception that maps to ErrorKind K.
#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace kvault::jinja {
namespace {

const RenderCase kCases[] = {
    {R"jinja(a
{% if true %}
b
{% endif %}
c
)jinja",
     R"jinja({})jinja",
     R"jinja(a
b
c)jinja"},
    {R"jinja(a
  {% if true %}
  b
  {% endif %}
c)jinja",
     R"jinja({})jinja",
     R"jinja(a
  b
c)jinja"},
    {R"jinja(a  {% if true %}b{% endif %}  c)jinja", R"jinja({})jinja",
     R"jinja(a  b  c)jinja"},
    {R"jinja(x {{- 'y' -}} z)jinja", R"jinja({})jinja", R"jinja(xyz)jinja"},
    {R"jinja(x

  {%- if true -%}

 y 

 {%- endif -%}

z)jinja",
     R"jinja({})jinja", R"jinja(xyz)jinja"},
    {R"jinja(  {%+ if true %}x{% endif +%}
y)jinja",
     R"jinja({})jinja",
     R"jinja(  x
y)jinja"},
    {R"jinja(a {# comment #}
b
  {# c2 #}
c)jinja",
     R"jinja({})jinja",
     R"jinja(a b
c)jinja"},
    {R"jinja(a {#- comment -#} b)jinja", R"jinja({})jinja", R"jinja(ab)jinja"},
    {R"jinja({% raw %}{{ x }}{% endraw %})jinja", R"jinja({})jinja",
     R"jinja({{ x }})jinja"},
    {R"jinja(  {% raw -%}  {{ x }}  {%- endraw %}
z)jinja",
     R"jinja({})jinja", R"jinja({{ x }}z)jinja"},
    {R"jinja({{ 'a' }}
{{ 'b' }}
)jinja",
     R"jinja({})jinja",
     R"jinja(a
b)jinja"},
    {R"jinja({{ 'a' }}

)jinja",
     R"jinja({})jinja",
     R"jinja(a
)jinja"},
    {R"jinja(line1
line2
{% if true %}
x
{% endif %}
)jinja",
     R"jinja({})jinja",
     R"jinja(line1
line2
x
)jinja"},
    {R"jinja(	{% for i in [1,2] %}
	{{ i }}
	{% endfor %}
)jinja",
     R"jinja({})jinja",
     R"jinja(	1
	2
)jinja"},
    {R"jinja({% for i in [1,2] %}{{ i }} {% endfor %}
   {{ 'end' }})jinja",
     R"jinja({})jinja", R"jinja(1 2    end)jinja"},
    {R"jinja(  {{ 'a' }}  {% if 1 %}  x{% endif %})jinja", R"jinja({})jinja",
     R"jinja(  a    x)jinja"},
    {R"jinja({% if true %}   
  x{% endif %})jinja",
     R"jinja({})jinja",
     R"jinja(   
  x)jinja"},
    {R"jinja(a
    {%- if true %}
    b{% endif %})jinja",
     R"jinja({})jinja", R"jinja(a    b)jinja"},
    {R"jinja({%- set x = 1 -%}
  {{ x }}
)jinja",
     R"jinja({})jinja", R"jinja(1)jinja"},
    {R"jinja({% set x = 1 %}  
{{ x }})jinja",
     R"jinja({})jinja",
     R"jinja(  
1)jinja"},
    {R"jinja(abc {% if true %}
  {% endif %}def)jinja",
     R"jinja({})jinja", R"jinja(abc def)jinja"},
    {R"jinja({{ 'x' }} {# c #}
{{ 'y' }})jinja",
     R"jinja({})jinja", R"jinja(x y)jinja"},
    {R"jinja({% generation %}  gen {{ 1 }}
{% endgeneration %}
after)jinja",
     R"jinja({})jinja",
     R"jinja(  gen 1
after)jinja"},
};

TEST(WhitespaceControlTest, MatchesJinja2) {
  for (const RenderCase& c : kCases) {
    EXPECT_EQ(RenderOrError(c.source, c.context), c.expected)
        << "template: " << c.source;
  }
}

}  // namespace
}  // namespace kvault::jinja
