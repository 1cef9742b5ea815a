// Short stories in the simple English of TinyStories (written for these
// tests), the kind of text stories260K was trained on: one text to calibrate
// quantization with, a different one to measure perplexity on.
#pragma once

namespace duet::testing {

inline constexpr const char* kCalibrationStory =
    "Once upon a time, there was a little boy named Tom. Tom liked to play with his red ball in "
    "the park. One day, he saw a big dog under a tree. The dog was sad because it was lost. Tom "
    "said, \"Do not be sad, dog. I will help you find your home.\" The dog wagged its tail. They "
    "walked and walked until they saw a little house with a blue door. A kind lady came out and "
    "said, \"Thank you, Tom! You found my dog!\" She gave Tom a big cookie. Tom was very happy. "
    "He went home and told his mom about the dog. His mom smiled and said, \"You are a good "
    "friend.\"\n"
    "Lily had a small cat named Mittens. Mittens liked to sleep in the sun. One morning, Lily "
    "wanted to play, but Mittens did not want to wake up. Lily had an idea. She took a piece of "
    "string and moved it near the cat. Mittens opened one eye, then the other. She jumped up and "
    "ran after the string. Lily laughed and laughed. They played all day in the garden, and when "
    "the sun went down, they both fell asleep on the soft grass.\n"
    "There was a bird who lived in a tall tree. The bird liked to sing every day. One day, the "
    "wind was very strong and the bird's nest fell down. The bird was scared. A girl named Sue "
    "saw the nest on the ground. She picked it up and put it back in the tree. The bird sang a "
    "happy song for Sue. From that day on, Sue and the bird were best friends.\n";

inline constexpr const char* kEvaluationStory =
    "Once upon a time, there was a little girl named Mia. Mia loved to look at the flowers in her "
    "garden. One day, she found a tiny frog sitting on a big green leaf. The frog said, \"Hello, "
    "Mia! Can you help me? I want to go to the pond.\" Mia said, \"Yes, I can help you!\" She put "
    "the frog in her hands and walked to the pond. The frog jumped into the water and said, "
    "\"Thank you, Mia!\" Mia waved goodbye and went home with a big smile.\n"
    "Ben and his sister Anna wanted to build a big castle of sand. They went to the beach with "
    "their mom and dad. Ben got the water and Anna made the walls. The castle was tall and "
    "pretty. Then a big wave came and the castle fell down. Anna was sad and began to cry. Ben "
    "said, \"Do not cry, Anna. We can make a new one together.\" They worked hard and made an "
    "even bigger castle. Mom and dad were proud of them.\n"
    "One day, a little bear named Max was very hungry. He looked in the tree, but there was no "
    "honey. He looked under the rock, but there was no food. Then he met a bunny. The bunny said, "
    "\"I have some berries. Do you want to share?\" Max was happy. They sat down and ate the "
    "berries together. Max learned that sharing with a friend is fun.\n"
    "Sam had a shiny toy car. He liked to race it on the floor of his room. One day, the car "
    "went under the bed and Sam could not find it. He looked and looked. His dog, Spot, came to "
    "help. Spot went under the bed and came out with the car in his mouth. Sam hugged Spot and "
    "said, \"You are the best dog!\" Then they played with the car until it was time for bed.\n";

}  // namespace duet::testing
