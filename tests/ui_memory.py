"""A memory big enough to test the inspector at a glance: many people, places, jobs and
pets told over many conversations, so an area query touches a graph of several hundred
nodes (fragments, entities, words, contexts, sessions).

Deterministic (no randomness): the same transcripts every run. Half the conversations
have an opaque id (as the proxy's own ``c`` + hex ids, or a client's UUIDs), so the
inspector must name them by what they are about, never by the hash.
"""

from __future__ import annotations

from typing import Any

__all__ = ["conversations"]

_PEOPLE = [
    ("Rui", "Lisbon", "nurse", "Ana", "sister", "a dog called Bolinha", "surfing"),
    ("Marta", "Porto", "architect", "Pedro", "brother", "a cat called Mia", "pottery"),
    ("Joana", "Coimbra", "teacher", "Tiago", "husband", "two goldfish", "choir singing"),
    ("Carlos", "Madrid", "chef", "Lucia", "wife", "a parrot called Kiko", "cycling"),
    ("Sofia", "Braga", "engineer", "Miguel", "cousin", "a rabbit called Neve", "climbing"),
    ("Helena", "Faro", "pharmacist", "Ines", "daughter", "a horse called Trovao", "sailing"),
    ("Bruno", "Aveiro", "pilot", "Clara", "mother", "a dog called Farrusco", "chess"),
    ("Laura", "Sevilla", "lawyer", "Diego", "father", "a tortoise called Lenta", "painting"),
    ("Tomas", "Evora", "baker", "Beatriz", "aunt", "a cat called Pimenta", "running"),
    ("Nuno", "Setubal", "journalist", "Rita", "friend", "a dog called Sombra", "fishing"),
    ("Irene", "Valencia", "dentist", "Pablo", "son", "a canary called Sol", "photography"),
    ("Duarte", "Viseu", "carpenter", "Leonor", "grandmother", "a cat called Tareco", "hiking"),
]
_COMPANIES = ["Hospital Santa Maria", "Atelier Norte", "Escola Verde", "Casa Lucio",
              "Bosch Braga", "Farmacia Central", "TAP Air Portugal", "Bufete Ruiz",
              "Padaria Real", "Jornal do Centro", "Clinica Sonrisa", "Oficina Dao"]


def _opaque(i: int) -> str:
    """An id that is only an identifier (as the proxy's own: ``c`` and 15 hex digits)."""
    return f"c{(0x3A7F19C2B4D5E60 + i * 0x1F3B5D7):015x}"


def _turns(i: int) -> list[tuple[str, str, str]]:
    name, city, job, kin, relation, pet, hobby = _PEOPLE[i]
    company = _COMPANIES[i]
    friend = _PEOPLE[(i + 1) % len(_PEOPLE)][0]
    return [
        ("user", name, f"Hi, I'm {name}. I live in {city} with my {relation} {kin}."),
        ("assistant", "Bot", f"Nice to meet you, {name}! How do you like {city}?"),
        ("user", name, f"I love it. I work as a {job} at {company} near the old town."),
        ("assistant", "Bot", f"Being a {job} must keep you busy. What do you do to relax?"),
        ("user", name, f"Mostly {hobby} on weekends, and I have {pet}."),
        ("assistant", "Bot", f"That sounds lovely. Does {kin} join you for {hobby}?"),
        ("user", name, f"Sometimes. My friend {friend} is visiting {city} next month."),
        ("assistant", "Bot", f"You could show {friend} your favourite places in {city}."),
        ("user", name, "Yes, we plan dinner by the river and a day trip to the coast."),
        ("assistant", "Bot", f"Enjoy the trip, {name}, and say hello to {kin}!"),
    ]


def conversations() -> list[dict[str, Any]]:
    """The ``POST /memory/ingest`` bodies: one conversation a person, a day each, opaque
    ids for every other one."""
    bodies = []
    for i in range(len(_PEOPLE)):
        day = f"2024-04-{i + 1:02d}"
        said = [
            {"role": role, "name": who, "content": text, "timestamp": f"{day}T09:{j:02d}:00"}
            for j, (role, who, text) in enumerate(_turns(i))
        ]
        bodies.append(
            {
                "conversation_id": _opaque(i) if i % 2 else f"chat-with-{_PEOPLE[i][0].lower()}",
                "messages": said,
            }
        )
    return bodies
