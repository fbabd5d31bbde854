"""Wire models of the Responses API's hosted tools that run code or make images: the code
interpreter and the shell with their containers, network policies and skills, the local shell,
programmatic tool calling, image generation (docs/protocol.md, "The Tool union and
tool_search_output"). `responses_tools` puts them in the `Tool` union."""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

from pydantic import (
    Field,
)

from convtap.models.conversation import WireModel
from convtap.models.responses_fields import (
    MemoryLimit,
    Omittable,
    ToolCaller,
)

# ── containers (code interpreter, shell) ─────────────────────────────────────


class ContainerNetworkPolicyDisabled(WireModel):
    """`ContainerNetworkPolicyDisabled { type }`: no outbound network access."""

    type: Literal["disabled"]


class ContainerNetworkPolicyDomainSecret(WireModel):
    """`ContainerNetworkPolicyDomainSecret { domain, name, value }`."""

    domain: str = Field(min_length=1)  # "minLength1"
    name: str = Field(min_length=1)  # "minLength1"
    value: str = Field(min_length=1, max_length=10485760)  # "minLength1 maxLength10485760"


class ContainerNetworkPolicyAllowlist(WireModel):
    """`ContainerNetworkPolicyAllowlist { allowed_domains, type, domain_secrets }`."""

    allowed_domains: list[str]
    type: Literal["allowlist"]
    domain_secrets: Omittable[list[ContainerNetworkPolicyDomainSecret]] = None


ContainerNetworkPolicy: TypeAlias = Annotated[
    ContainerNetworkPolicyDisabled | ContainerNetworkPolicyAllowlist, Field(discriminator="type")
]


class CodeInterpreterToolAuto(WireModel):
    """`CodeInterpreterToolAuto`: a container configured for this request."""

    type: Literal["auto"]
    file_ids: Omittable[list[str]] = None
    memory_limit: MemoryLimit | None = None
    network_policy: Omittable[ContainerNetworkPolicy] = None


class CodeInterpreter(WireModel):
    """`CodeInterpreter { container, type, allowed_callers }`: runs Python code."""

    # "Can be a container ID or an object ..."
    container: str | CodeInterpreterToolAuto
    type: Literal["code_interpreter"]
    allowed_callers: list[ToolCaller] | None = None


class SkillReference(WireModel):
    """`SkillReference { skill_id, type, version }`: a skill made with /v1/skills."""

    skill_id: str = Field(min_length=1, max_length=64)  # "minLength1 maxLength64"
    type: Literal["skill_reference"]
    # "Use a positive integer or 'latest'. Omit for default."
    version: Omittable[Annotated[str, Field(pattern=r"^(?:[1-9][0-9]*|latest)$")]] = None


class InlineSkillSource(WireModel):
    """`InlineSkillSource { data, media_type, type }`: a base64 zip bundle."""

    data: str = Field(min_length=1, max_length=70254592)  # "minLength1 maxLength70254592"
    media_type: Literal["application/zip"]  # "Must be application/zip."
    type: Literal["base64"]  # "Must be base64."


class InlineSkill(WireModel):
    """`InlineSkill { description, name, source, type }`."""

    description: str
    name: str
    source: InlineSkillSource
    type: Literal["inline"]


ContainerSkill: TypeAlias = Annotated[SkillReference | InlineSkill, Field(discriminator="type")]


class ContainerAuto(WireModel):
    """`ContainerAuto`: automatically creates a container for this request."""

    type: Literal["container_auto"]
    file_ids: Omittable[list[str]] = None
    memory_limit: MemoryLimit | None = None
    network_policy: Omittable[ContainerNetworkPolicy] = None
    skills: Omittable[list[ContainerSkill]] = None


class LocalSkill(WireModel):
    """`LocalSkill { description, name, path }`."""

    description: str
    name: str
    path: str


class LocalEnvironment(WireModel):
    """`LocalEnvironment { type, skills }`: a local computer environment."""

    type: Literal["local"]
    skills: Omittable[list[LocalSkill]] = None


class ContainerReference(WireModel):
    """`ContainerReference { container_id, type }`: a container made with /v1/containers."""

    container_id: str
    type: Literal["container_reference"]


ShellEnvironment: TypeAlias = Annotated[
    ContainerAuto | LocalEnvironment | ContainerReference, Field(discriminator="type")
]


class FunctionShellTool(WireModel):
    """`FunctionShellTool { type, allowed_callers, environment }`: runs shell commands."""

    type: Literal["shell"]
    allowed_callers: list[ToolCaller] | None = None
    environment: ShellEnvironment | None = None


class LocalShell(WireModel):
    """`LocalShell { type }`: runs shell commands in a local environment."""

    type: Literal["local_shell"]


class ProgrammaticToolCalling(WireModel):
    """`ProgrammaticToolCalling { type }`."""

    type: Literal["programmatic_tool_calling"]


# ── image generation ─────────────────────────────────────────────────────────


class InputImageMask(WireModel):
    """`InputImageMask { file_id, image_url }`: optional mask for inpainting."""

    file_id: Omittable[str] = None
    image_url: Omittable[str] = Field(default=None, description="Base64-encoded mask image.")


class ImageGeneration(WireModel):
    """`ImageGeneration`: generates images using the GPT image models."""

    type: Literal["image_generation"]
    action: Omittable[Literal["generate", "edit", "auto"]] = None
    background: Omittable[Literal["transparent", "opaque", "auto"]] = None
    input_fidelity: Literal["high", "low"] | None = None
    input_image_mask: Omittable[InputImageMask] = None
    # "(string & {}) | "gpt-image-1" | ...": an open set.
    model: Omittable[str] = Field(
        default=None,
        description="Open set; listed: gpt-image-1, gpt-image-1-mini, gpt-image-1.5, "
        "gpt-image-2, gpt-image-2-2026-04-21, gpt-image-2.5-sunburst, "
        "gpt-image-2.5-sunburst-2026-09-08, gpt-image-2.5-flare, "
        "gpt-image-2.5-flare-2026-09-08, chatgpt-image-latest.",
    )
    moderation: Omittable[Literal["auto", "low"]] = None
    # "minimum0 maximum100".
    output_compression: Omittable[Annotated[int, Field(ge=0, le=100)]] = None
    output_format: Omittable[Literal["png", "webp", "jpeg"]] = None
    # "from 0 (default value) to 3" ("minimum0 maximum3").
    partial_images: Omittable[Annotated[int, Field(ge=0, le=3)]] = None
    quality: Omittable[Literal["low", "medium", "high", "xhigh", "max", "auto"]] = None
    # "(string & {}) | "1024x1024" | ...": an open set (WIDTHxHEIGHT for some models).
    size: Omittable[str] = Field(
        default=None, description="Open set; listed: 1024x1024, 1024x1536, 1536x1024, auto."
    )
