{% extends "modules/modulefile.lua" %}
{# A module of a package Spack built on the Cray PE: the Cray modules of the external
   packages it links (cray-mpich, cray-hdf5-parallel, the PrgEnv, ...) are prerequisites:
   the user loads them, as the PE orders them; nothing of theirs is set here. #}
{% block autoloads %}
{% set seen = [] %}
{% for dependency in spec.traverse(root=False) %}
{% for module in dependency.external_modules or [] %}
{% if module not in seen %}{% set _ = seen.append(module) %}
prereq("{{ module }}")
{% endif %}
{% endfor %}
{% endfor %}
{{ super() }}
{% endblock %}
