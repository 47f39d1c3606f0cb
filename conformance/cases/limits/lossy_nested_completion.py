return {"list": [1, 2, {"bad": float("nan")}]}
