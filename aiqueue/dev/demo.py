"""Demo data for `python -m aiqueue dev`: one class's short answers and the rubric to mark them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from aiqueue.db.store import Store

ASSIGNMENT_ID = "demo-photosynthesis"
TITLE = "Year 9 Biology: Photosynthesis (short answer)"
_NAMESPACE = uuid.UUID("6f1c2f0e-4a55-4c1b-9a0e-3d8f7e1b2c10")

QUESTION = (
    "Explain how photosynthesis works. What does a plant need, what does it make, "
    "and where in the plant cell does it happen?"
)
RUBRIC: list[dict[str, Any]] = [
    {"criterion": "Names light as the energy source", "points": 2,
     "keywords": ["light"]},
    {"criterion": "Names carbon dioxide and water as the raw materials", "points": 2,
     "keywords": ["carbon dioxide", "water", "co2"]},
    {"criterion": "Names glucose (sugar) as the product", "points": 2,
     "keywords": ["glucose", "sugar"]},
    {"criterion": "Names oxygen as the by-product", "points": 2,
     "keywords": ["oxygen"]},
    {"criterion": "Places it in the chloroplasts / chlorophyll", "points": 2,
     "keywords": ["chloroplast", "chlorophyll"]},
]
MAX_SCORE = 10

ANSWERS: list[tuple[str, str]] = [
    ("Amara Okafor", "Plants take in carbon dioxide and water and use light energy to make "
     "glucose. Oxygen is given off. It happens in the chloroplasts, which contain chlorophyll."),
    ("Ben Hughes", "Photosynthesis is when plants make their own food from sunlight."),
    ("Chloe Martin", "The plant uses sunlight, water and CO2 to make sugar and oxygen. This "
     "happens in the leaves."),
    ("Daniel Kim", "Plants breathe in oxygen and breathe out carbon dioxide, it happens in "
     "the roots."),
    ("Elif Yilmaz", "Chlorophyll in the chloroplasts absorbs light. The energy is used to "
     "turn carbon dioxide and water into glucose, and oxygen is released as a waste product."),
    ("Finn O'Connor", "Light + water + carbon dioxide -> glucose + oxygen. In the chloroplast."),
    ("Grace Liu", "Plants need sun and water to grow. They make food."),
    ("Hassan Ali", "It happens in the chloroplasts. The plant makes glucose which it uses for "
     "respiration or stores as starch."),
    ("Isla Campbell", "Photosynthesis turns light energy into chemical energy. The plant takes "
     "carbon dioxide from the air and water from the soil and makes glucose and oxygen."),
    ("Jonas Weber", "The leaves are green because of chlorophyll which traps sunlight."),
    ("Kavya Reddy", "Water goes up from the roots and carbon dioxide goes in through the "
     "stomata. Using light, the chloroplasts make sugar. Oxygen goes out of the stomata."),
    ("Liam Byrne", "plants make oxygen for us to breathe"),
    ("Maya Patel", "In the chloroplasts, light energy is absorbed by chlorophyll and used to "
     "make glucose from carbon dioxide and water. Oxygen is a by-product."),
    ("Noah Schmidt", "Plants get their food from the soil through the roots, and sunlight "
     "helps."),
    ("Olivia Brown", "Carbon dioxide and water react to make glucose and oxygen."),
    ("Pedro Alves", "It needs light, water and carbon dioxide. It makes glucose."),
    ("Quinn Taylor", "The mitochondria use sunlight to make energy for the plant."),
    ("Rosa Jimenez", "Photosynthesis happens in the chloroplasts of leaf cells. The plant "
     "makes sugar and releases oxygen."),
    ("Sam Walker", "Sunlight is trapped by chlorophyll. Water is split and oxygen is "
     "released. Carbon dioxide is turned into glucose."),
    ("Tara Nguyen", "Plants need water, air and light."),
    ("Umar Farooq", "6CO2 + 6H2O -> C6H12O6 + 6O2 using light energy in the chloroplasts. "
     "The glucose is the food and oxygen is released."),
    ("Valentina Rossi", "Plants make glucose and oxygen."),
    ("William Evans", "The plant absorbs carbon dioxide at night and releases oxygen in the "
     "day."),
    ("Xin Yi Chen", "Using energy from light, chloroplasts turn water and carbon dioxide into "
     "glucose. Oxygen is produced."),
    ("Yusuf Demir", "I don't know."),
    ("Zoe Anderson", "Photosynthesis is a chemical reaction in green plants. Light is needed. "
     "The products are glucose and oxygen."),
    ("Aiden Murphy", "Plants take in water through the roots and carbon dioxide through the "
     "leaves and make sugar."),
    ("Bea Santos", "It happens in the chlorophyll and makes oxygen."),
    ("Caleb Foster", "Light energy, carbon dioxide and water are needed. Glucose and oxygen "
     "are made. It takes place in chloroplasts."),
    ("Dina Haddad", "The plant uses the sun to make its food, which is called glucose."),
]


def submission_id(index: int) -> uuid.UUID:
    """The fixed id of the demo's `index`-th submission (stable across runs)."""
    return uuid.uuid5(_NAMESPACE, f"aiqueue-demo/{ASSIGNMENT_ID}/{index}")


def payload() -> dict[str, Any]:
    """What every demo enqueue hands the marking function."""
    return {"question": QUESTION, "rubric": RUBRIC, "max_score": MAX_SCORE}


async def seed(store: Store) -> int:
    """Insert the demo assignment and its submissions if absent; how many submissions were new."""
    await store.save_assignment(ASSIGNMENT_ID, TITLE, payload())
    now = datetime.now(UTC).isoformat()
    rows = [
        {"id": str(submission_id(i)), "assignment_id": ASSIGNMENT_ID, "student_name": name,
         "content": answer, "created_at": now}
        for i, (name, answer) in enumerate(ANSWERS)
    ]
    return await store.seed_submissions(rows)
