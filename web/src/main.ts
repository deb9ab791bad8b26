/** Entry point of the explorer page. */
import "./styles.css";
import { main } from "./app";

void main(document.getElementById("app")!);
