"""Synthetic but realistic chat text for the benchmarks, generated from a seeded RNG.

Conversations between two named speakers about friends, places, hobbies, food, pets,
jobs and dates, filled from fixed vocabularies into fixed templates, so that questions
built from the same vocabularies (see ``NAMES``, ``PLACES``, ``HOBBIES``, ...) find
them. The same seed always yields the same text; nothing here touches the network, the
environment or the clock.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

__all__ = [
    "ASSISTANT_TEMPLATES",
    "BASE_TS",
    "FOODS",
    "HOBBIES",
    "JOBS",
    "MONTHS",
    "NAMES",
    "PETS",
    "PET_NAMES",
    "PLACES",
    "USER_TEMPLATES",
    "WEEKDAYS",
    "slot_values",
    "synthetic_conversation",
]

BASE_TS = 1_672_531_200.0  # 2023-01-01 UTC

NAMES = (
    "Priya", "Marcus", "Sofia", "Kenji", "Amara", "Lukas", "Fatima", "Diego", "Hannah",
    "Omar", "Chloe", "Ravi", "Elena", "Tobias", "Aisha", "Mateo", "Ingrid", "Kwame",
    "Yuki", "Nadia", "Samuel", "Leila", "Connor", "Mei", "Rafael", "Zara", "Henrik",
    "Lucia", "Theo", "Anika", "Jonas", "Imani", "Pavel", "Rosa", "Arjun", "Greta",
    "Malik", "Clara", "Dmitri", "Noor",
)
PLACES = (
    "Lisbon", "Kyoto", "Portland", "Marrakesh", "Edinburgh", "Oaxaca", "Bergen", "Hanoi",
    "Cape Town", "Montreal", "Tbilisi", "Valparaiso", "Ljubljana", "Seville", "Queenstown",
    "Krakow", "Nairobi", "Reykjavik", "Busan", "Tallinn", "the Lake District",
    "the Dolomites", "Brooklyn", "Cornwall", "Patagonia", "Sardinia", "Vancouver Island",
    "the Algarve", "Hokkaido", "Tasmania",
)
HOBBIES = (
    "bouldering", "pottery", "birdwatching", "sourdough baking", "trail running",
    "watercolour painting", "chess", "salsa dancing", "kayaking", "beekeeping",
    "film photography", "woodworking", "choir singing", "urban sketching", "surfing",
    "knitting", "astronomy", "calligraphy", "cycling", "gardening", "the ukulele",
    "board games", "fencing", "scuba diving", "origami", "rowing", "yoga", "archery",
    "mushroom foraging", "jazz piano",
)
FOODS = (
    "lemon tart", "ramen", "paella", "banana bread", "dumplings", "shakshuka",
    "mushroom risotto", "tacos al pastor", "pho", "apple crumble", "curry", "pierogi",
)
PETS = ("dog", "cat", "parrot", "rabbit", "tortoise", "hamster", "greyhound", "kitten")
PET_NAMES = ("Biscuit", "Mochi", "Pepper", "Luna", "Waffles", "Juniper", "Ziggy", "Olive")
JOBS = (
    "nurse", "teacher", "data analyst", "carpenter", "architect", "paramedic", "chef",
    "librarian", "software engineer", "marine biologist", "translator", "midwife",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August",
    "September", "October", "November", "December",
)
USER_TEMPLATES = (
    "I went {hobby} near {place} with {friend} last {weekday}; we stayed out until {hour} pm.",
    "{friend} finally got the job as a {job} in {place} after {number} interviews!",
    "My {pet} {petname} knocked over the {food} again, so I baked a second one at midnight.",
    "I'm planning a trip to {place} on {day} {month}, mostly for the {hobby} and the {food}.",
    "Should I sign up for the {hobby} class at the community centre? It's {number} dollars.",
    "{friend} and I cooked {food} for {number} people at the street party in {place}.",
    "I've been reading about {hobby} every evening; {friend} lent me a book from {place}.",
    "We adopted a {pet} called {petname} on {day} {month}; she's {small} months old.",
    "Work has been hectic: I covered {number} shifts as a {job} this month.",
    "{friend} ran the half marathon in {place} in {minutes} minutes, a personal best!",
    "I finally finished my {hobby} project, it took {small} weekends and a lot of patience.",
    "My sister moved to {place} in {month} and already found a {hobby} club there.",
    "Remember the {food} place in {place}? {friend} says it closed in {month}.",
    "I spent {small} hours on {hobby} yesterday and my shoulders are still sore.",
)
ASSISTANT_TEMPLATES = (
    "That sounds wonderful! How long have you been into {hobby}?",
    "Congratulations to {friend}! Being a {job} in {place} must be exciting.",
    "Oh no, poor {petname}! Did the {food} turn out well the second time?",
    "{place} in {month} is lovely. Will {friend} come along for the {hobby}?",
    "{number} dollars seems fair if the teacher is good. What drew you to {hobby}?",
    "Cooking {food} for {number} people is impressive! Who came up with the recipe?",
    "{friend} has good taste. Have you tried {hobby} with a group yet?",
    "{petname} is a great name for a {pet}! How is she settling in?",
    "{number} shifts is a lot. Are you getting any rest, or time for {hobby}?",
    "{minutes} minutes is fast! Is {friend} training for a full marathon in {place}?",
    "{small} weekends well spent. Will you show it at the {place} fair?",
    "A {hobby} club in {place} sounds like a great way to settle in.",
    "That's a shame about the {food} place. Did {friend} find a new favourite?",
    "Take it easy! Maybe stretch before your next {hobby} session.",
)


def slot_values(rng: random.Random, speakers: Sequence[str]) -> dict[str, Any]:
    """Random values for every template slot (a friend is never one of the speakers)."""
    return {
        "friend": rng.choice([n for n in NAMES if n not in speakers]),
        "place": rng.choice(PLACES), "hobby": rng.choice(HOBBIES), "food": rng.choice(FOODS),
        "pet": rng.choice(PETS), "petname": rng.choice(PET_NAMES), "job": rng.choice(JOBS),
        "weekday": rng.choice(WEEKDAYS), "month": rng.choice(MONTHS),
        "day": rng.randint(1, 28), "hour": rng.randint(5, 11), "small": rng.randint(2, 9),
        "number": rng.randint(10, 400), "minutes": rng.randint(85, 140),
    }


def synthetic_conversation(rng: random.Random, turns: int) -> list[dict[str, Any]]:
    """``turns`` alternating user/assistant messages between two named speakers."""
    speakers = rng.sample(NAMES, 2)
    start = BASE_TS + rng.uniform(0, 2 * 365 * 86_400)
    messages = []
    for turn in range(turns):
        user = turn % 2 == 0
        template = rng.choice(USER_TEMPLATES if user else ASSISTANT_TEMPLATES)
        messages.append({
            "role": "user" if user else "assistant",
            "name": speakers[0] if user else speakers[1],
            "content": template.format(**slot_values(rng, speakers)),
            "timestamp": start + 60 * turn,
        })
    return messages
