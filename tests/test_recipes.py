"""Apptainer recipes split once (climstack.stack.recipes): stages, sections and here-documents
as written, for the committed recipes and for the cases they do not show."""

import pytest

from climstack.stack import containers, environments, recipes

RECIPE = """# a comment before the first stage
Bootstrap: {{ bootstrap }}
From: {{ base }}
Stage: build

%arguments
  # bootstrap=library would be a comment
  bootstrap=docker
  base=debian:12

%files
  repo /opt/repo
  # a comment
  environments/stack.yaml

%post
  cat << 'END' > spack.yaml
spack:
  specs: [zlib]
%20 is text here, not a section
END
  echo done

Bootstrap: docker
From: debian:12
Stage: final

%files from build
  /opt/repo /opt

%post
  true
"""


def test_stages_and_sections_keep_every_line():
    build, final = recipes.stages(RECIPE)
    assert build.text + final.text == RECIPE
    assert (build.name, final.name) == ("build", "final")
    assert build.header.startswith("# a comment before the first stage\nBootstrap:")
    assert [s.name for s in build.sections] == ["arguments", "files", "post"]
    assert build.section("arguments").lines() == ["bootstrap=docker", "base=debian:12"]
    assert "%20 is text here" in build.section("post").body
    assert final.section("files") is None
    assert final.section("files", "from build").lines() == ["/opt/repo /opt"]


def test_files_from_the_host_and_here_documents():
    assert recipes.files(RECIPE) == [
        ("repo", "/opt/repo"),
        ("environments/stack.yaml", "environments/stack.yaml"),
    ]
    post = recipes.stages(RECIPE)[0].section("post").body
    assert recipes.heredoc(post, "END") == (
        "spack:\n  specs: [zlib]\n%20 is text here, not a section"
    )
    assert recipes.heredoc(post, "EOF") is None
    assert recipes.heredoc("  cat << 'END' > x\nno end\n", "END") is None


@pytest.mark.parametrize("name", containers.container_environments())
def test_the_committed_recipes_split_into_build_and_final(name):
    text = (environments.resolve(name) / containers.RECIPE).read_text()
    stages = recipes.stages(text)
    assert [s.name for s in stages] == ["build", "final"]
    assert "".join(s.text for s in stages) == text
    assert [s.name for s in stages[1].sections] == [
        "arguments",
        "files",
        "post",
        "environment",
        "runscript",
        "test",
        "help",
        "labels",
    ]
    assert containers.embedded_manifest(text).startswith("spack:\n  include:\n")
